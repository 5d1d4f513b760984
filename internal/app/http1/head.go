package http1

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Message heads (RFC 9112 sections 2 to 5):
//
//	request:  method SP request-target SP HTTP/1.x CRLF
//	response: HTTP/1.x SP 3DIGIT SP reason-phrase CRLF
//	then:     *( field-name ":" OWS field-value OWS CRLF )
//	          CRLF
//
// A line may end in a bare LF (section 2.2). Obsolete line folding,
// whitespace before the colon and stray CRs are errors (sections 2.2 and
// 5.1), as are versions other than HTTP/1.0 and HTTP/1.1.

var (
	// ErrMalformed is wrapped by the errors of heads and bodies that
	// break the syntax; the peer gets a 400 (or the client a 502).
	ErrMalformed = errors.New("malformed message")
	// ErrTooLarge: a head or a line over the limit its reader was given,
	// or more than MaxFields field lines.
	ErrTooLarge = errors.New("message head too large")
	// ErrVersion: a well-formed HTTP version other than 1.0 and 1.1
	// (answered 505 where a server can).
	ErrVersion = errors.New("HTTP version not supported")
	// ErrUnsupported: a transfer coding other than chunked.
	ErrUnsupported = errors.New("unsupported transfer coding")
)

// Request is the head of a client's request.
type Request struct {
	Method string
	Target string // the request-target as sent
	Minor  int    // HTTP/1.Minor: 0 or 1
	Header Header
}

// Response is the head of an upstream's response.
type Response struct {
	Minor  int
	Status int
	Reason string
	Header Header
}

// ParseRequest parses a request head: the bytes up to and including the
// empty line that ends it, as ReadHead returns them.
func ParseRequest(head []byte) (*Request, error) {
	first, h, err := splitHead(head)
	if err != nil {
		return nil, err
	}
	method, rest, ok1 := strings.Cut(first, " ")
	target, version, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || !IsToken(method) || !isRequestTarget(target) {
		return nil, fmt.Errorf("%w: bad Request line %.64q", ErrMalformed, first)
	}
	minor, err := parseVersion(version)
	if err != nil {
		return nil, err
	}
	r := &Request{Method: method, Target: target, Minor: minor, Header: h}
	// A proxy ignores Host for absolute-form, but HTTP/1.1 demands
	// exactly one (RFC 9112 section 3.2).
	if n := len(h.Values("Host")); n > 1 || (n == 0 && minor == 1) {
		return nil, fmt.Errorf("%w: want one Host field, have %d", ErrMalformed, n)
	}
	return r, nil
}

// ParseResponse parses a response head as ReadHead returns it.
func ParseResponse(head []byte) (*Response, error) {
	first, h, err := splitHead(head)
	if err != nil {
		return nil, err
	}
	version, rest, _ := strings.Cut(first, " ")
	minor, err := parseVersion(version)
	if err != nil {
		return nil, err
	}
	code, reason, _ := strings.Cut(rest, " ")
	if len(code) != 3 || !IsDigits(code) || code[0] == '0' || !IsFieldText(reason) {
		return nil, fmt.Errorf("%w: bad status line %.64q", ErrMalformed, first)
	}
	status, _ := strconv.Atoi(code)
	return &Response{Minor: minor, Status: status, Reason: reason, Header: h}, nil
}

// MaxFields bounds the field lines of a head, and so the memory a head of
// many tiny lines costs beyond its bytes.
const MaxFields = 1000

// splitHead splits a head into its first line and its fields. The fields
// are substrings of one copy of the head.
func splitHead(b []byte) (string, Header, error) {
	head := string(b)
	var first string
	var h Header
	for i := 0; ; i++ {
		nl := strings.IndexByte(head, '\n')
		if nl < 0 {
			return "", nil, fmt.Errorf("%w: head does not end in an empty line", ErrMalformed)
		}
		line := strings.TrimSuffix(head[:nl], "\r")
		head = head[nl+1:]
		switch {
		case i == 0:
			first = line
		case line == "":
			if len(head) != 0 {
				return "", nil, fmt.Errorf("%w: bytes after the head", ErrMalformed)
			}
			return first, h, nil
		case len(h) == MaxFields:
			return "", nil, fmt.Errorf("%w: over %d fields", ErrTooLarge, MaxFields)
		default:
			f, err := ParseField(line)
			if err != nil {
				return "", nil, err
			}
			h = append(h, f)
		}
	}
}

// ParseField parses a field line (of a head or a trailer) without its
// line end.
func ParseField(line string) (Field, error) {
	name, value, ok := strings.Cut(line, ":")
	if !ok || !IsToken(name) {
		// Also obs-fold (a leading SP or HTAB) and "Name :".
		return Field{}, fmt.Errorf("%w: bad field line %.64q", ErrMalformed, line)
	}
	value = strings.Trim(value, " \t")
	if !IsFieldText(value) {
		return Field{}, fmt.Errorf("%w: bad value of field %.64q", ErrMalformed, name)
	}
	return Field{name, value}, nil
}

func parseVersion(v string) (int, error) {
	switch v {
	case "HTTP/1.0":
		return 0, nil
	case "HTTP/1.1":
		return 1, nil
	}
	if len(v) == 8 && strings.HasPrefix(v, "HTTP/") && IsDigits(v[5:6]) && v[6] == '.' && IsDigits(v[7:]) {
		return 0, fmt.Errorf("%w: %s (want HTTP/1.0 or HTTP/1.1)", ErrVersion, v)
	}
	return 0, fmt.Errorf("%w: bad version %.16q", ErrMalformed, v)
}

// isRequestTarget: non-empty, without whitespace or control characters.
func isRequestTarget(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return s != ""
}

func IsDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// AppendRequestHead appends an HTTP/1.1 request head.
func AppendRequestHead(b []byte, method, target string, h Header) []byte {
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, target...)
	b = append(b, " HTTP/1.1\r\n"...)
	b = h.AppendTo(b)
	return append(b, "\r\n"...)
}

// AppendResponseHead appends an HTTP/1.1 response head: a proxy sends
// its own version, whatever the upstream's.
func AppendResponseHead(b []byte, status int, reason string, h Header) []byte {
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	b = append(b, reason...)
	b = append(b, "\r\n"...)
	b = h.AppendTo(b)
	return append(b, "\r\n"...)
}

// ReadHead reads a message head from br up to and including its empty
// line, skipping empty lines before it (RFC 9112 section 2.2); those
// count toward limit. A stream that ends before the first byte gives
// io.EOF, one that ends inside the head io.ErrUnexpectedEOF.
func ReadHead(br *bufio.Reader, limit int) ([]byte, error) {
	var head []byte
	total, lineStart := 0, 0
	for {
		frag, err := br.ReadSlice('\n')
		total += len(frag)
		if total > limit {
			return nil, fmt.Errorf("%w: over %d bytes", ErrTooLarge, limit)
		}
		head = append(head, frag...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && total == 0:
			return nil, io.EOF
		case err == io.EOF:
			return nil, io.ErrUnexpectedEOF
		case err != nil:
			return nil, err
		}
		if line := string(head[lineStart:]); line == "\r\n" || line == "\n" {
			if lineStart == 0 {
				head = head[:0]
				continue
			}
			return head, nil
		}
		lineStart = len(head)
	}
}

// ReadLine reads a line of at most limit bytes and returns it without
// its line end; the result is a fresh slice.
func ReadLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > limit {
			return nil, fmt.Errorf("%w: line over %d bytes", ErrTooLarge, limit)
		}
		line = append(line, frag...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF:
			return nil, io.ErrUnexpectedEOF
		case err != nil:
			return nil, err
		}
		line = line[:len(line)-1]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		return line, nil
	}
}
