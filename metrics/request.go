package metrics

import (
	"bytes"
	"errors"
	"strconv"
	"time"
)

// The subset of HTTP/1.1 (RFC 9112) a scrape endpoint needs: a request
// head is read and parsed, its body is never read, and every response has
// a Content-Length.
//
//	GET /metrics HTTP/1.1\r\n          request line: METHOD SP TARGET SP VERSION
//	Host: 127.0.0.1:9586\r\n           header lines: NAME ":" OWS VALUE OWS
//	Connection: close\r\n
//	\r\n                               an empty line ends the head
//
// Lines may end in a bare LF, as RFC 9112 section 2.2 lets a server
// accept.

// Sentinel errors of parseRequest, each answered with its status.
var (
	errMalformed    = errors.New("malformed request")          // 400
	errHeadTooLarge = errors.New("request head too large")     // 431
	errVersion      = errors.New("HTTP version not supported") // 505
)

// request is what the server uses of a request head.
type request struct {
	method string
	path   string // the target's path, without query; "*" for OPTIONS *
	minor  int    // HTTP/1.minor
	// close: the client asked to close the connection, or spoke HTTP/1.0
	// (which is answered and closed: keep-alive there is an extension).
	close bool
	// hasBody: a Content-Length above 0 or a Transfer-Encoding; the body
	// is not read, so the connection closes after the response.
	hasBody bool
}

// headEnd is the length of the head at the start of b, through the empty
// line that ends it, or -1 if b holds no complete head.
func headEnd(b []byte) int {
	for i := 0; i < len(b); i++ {
		if b[i] != '\n' {
			continue
		}
		switch {
		case i+1 < len(b) && b[i+1] == '\n':
			return i + 2
		case i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n':
			return i + 3
		}
	}
	return -1
}

// parseRequest parses a head as headEnd delimits it. Bad input returns
// one of the sentinel errors, never a panic.
func parseRequest(head []byte) (request, error) {
	line, rest, ok := cutLine(head)
	if !ok {
		return request{}, errMalformed
	}
	req, err := parseRequestLine(line)
	if err != nil {
		return request{}, err
	}
	var (
		hosts     int
		length    = -1
		keepAlive bool
	)
	for {
		line, rest, ok = cutLine(rest)
		if !ok {
			return request{}, errMalformed // no empty line
		}
		if len(line) == 0 {
			break
		}
		name, val, err := parseField(line)
		if err != nil {
			return request{}, err
		}
		switch {
		case asciiEqualFold(name, "host"):
			hosts++
		case asciiEqualFold(name, "content-length"):
			n, ok := parseLength(val)
			if !ok || length >= 0 && n != length {
				return request{}, errMalformed
			}
			length = n
		case asciiEqualFold(name, "transfer-encoding"):
			if req.minor == 0 {
				return request{}, errMalformed
			}
			req.hasBody = true
		case asciiEqualFold(name, "connection"):
			for tok := range bytes.SplitSeq(val, []byte(",")) {
				tok = bytes.Trim(tok, " \t")
				req.close = req.close || asciiEqualFold(tok, "close")
				keepAlive = keepAlive || asciiEqualFold(tok, "keep-alive")
			}
		}
	}
	if len(rest) != 0 || hosts > 1 || req.minor == 1 && hosts == 0 {
		return request{}, errMalformed
	}
	req.hasBody = req.hasBody || length > 0
	req.close = req.close || req.minor == 0
	return req, nil
}

// cutLine cuts the line ending in LF or CRLF off the front of b; a CR
// anywhere else makes it malformed (ok false).
func cutLine(b []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return nil, nil, false
	}
	line, rest = b[:i], b[i+1:]
	line = bytes.TrimSuffix(line, []byte("\r"))
	if bytes.IndexByte(line, '\r') >= 0 {
		return nil, nil, false
	}
	return line, rest, true
}

func parseRequestLine(line []byte) (request, error) {
	method, rest, ok1 := bytes.Cut(line, []byte(" "))
	target, version, ok2 := bytes.Cut(rest, []byte(" "))
	if !ok1 || !ok2 || !isToken(method) || len(target) == 0 {
		return request{}, errMalformed
	}
	for _, c := range target {
		if c <= ' ' || c >= 0x7f {
			return request{}, errMalformed
		}
	}
	var req request
	switch string(version) {
	case "HTTP/1.1":
		req.minor = 1
	case "HTTP/1.0":
	default:
		if len(version) == 8 && string(version[:5]) == "HTTP/" && isDigit(version[5]) && version[6] == '.' && isDigit(version[7]) {
			return request{}, errVersion
		}
		return request{}, errMalformed
	}
	path, ok := targetPath(target)
	if !ok {
		return request{}, errMalformed
	}
	req.method, req.path = internMethod(method), string(path)
	return req, nil
}

// targetPath is the path of an origin-form (/metrics?x), absolute-form
// (http://host/metrics) or asterisk-form (*) target.
func targetPath(t []byte) ([]byte, bool) {
	if string(t) == "*" {
		return t, true
	}
	for _, scheme := range []string{"http://", "https://"} {
		if len(t) >= len(scheme) && asciiEqualFold(t[:len(scheme)], scheme) {
			t = t[len(scheme):]
			i := bytes.IndexByte(t, '/')
			if i < 0 {
				return []byte("/"), true
			}
			t = t[i:]
			break
		}
	}
	if t[0] != '/' {
		return nil, false
	}
	if i := bytes.IndexByte(t, '?'); i >= 0 {
		t = t[:i]
	}
	return t, true
}

// parseField splits a header line into name and value, without the
// optional whitespace around the value.
func parseField(line []byte) (name, val []byte, err error) {
	name, val, ok := bytes.Cut(line, []byte(":"))
	if !ok || !isToken(name) { // also a folded line, which starts with SP or HT
		return nil, nil, errMalformed
	}
	val = bytes.Trim(val, " \t")
	for _, c := range val {
		if c < ' ' && c != '\t' || c == 0x7f {
			return nil, nil, errMalformed
		}
	}
	return name, val, nil
}

// parseLength parses a Content-Length: decimal digits, no sign, at most
// 18 of them so it fits an int.
func parseLength(v []byte) (int, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	n := 0
	for _, c := range v {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// internMethod spares the usual methods an allocation.
func internMethod(m []byte) string {
	for _, s := range []string{"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"} {
		if string(m) == s {
			return s
		}
	}
	return string(m)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isToken: a non-empty RFC 9110 token (method, field name).
func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', isDigit(c):
		case bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0:
		default:
			return false
		}
	}
	return true
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// response is the head of a reply; the body follows it as is.
type response struct {
	status      int
	contentType string
	bodyLen     int
	allow       string // for 405
	close       bool
}

const (
	textPlain   = "text/plain; charset=utf-8"
	promContent = "text/plain; version=0.0.4; charset=utf-8"
)

// appendResponse appends the status line and header fields of r.
func appendResponse(b []byte, r response, now time.Time) []byte {
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(r.status), 10)
	b = append(b, ' ')
	b = append(b, statusText(r.status)...)
	b = append(b, "\r\nDate: "...)
	b = now.UTC().AppendFormat(b, "Mon, 02 Jan 2006 15:04:05 GMT")
	b = append(b, "\r\nContent-Type: "...)
	b = append(b, r.contentType...)
	b = append(b, "\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(r.bodyLen), 10)
	if r.allow != "" {
		b = append(b, "\r\nAllow: "...)
		b = append(b, r.allow...)
	}
	if r.close {
		b = append(b, "\r\nConnection: close"...)
	}
	return append(b, "\r\n\r\n"...)
}

func statusText(code int) string {
	switch code {
	case 200:
		return "OK"
	case 400:
		return "Bad Request"
	case 404:
		return "Not Found"
	case 405:
		return "Method Not Allowed"
	case 431:
		return "Request Header Fields Too Large"
	case 503:
		return "Service Unavailable"
	case 505:
		return "HTTP Version Not Supported"
	}
	return "Status"
}

// errorStatus is the status a parse error is answered with.
func errorStatus(err error) int {
	switch err {
	case errHeadTooLarge:
		return 431
	case errVersion:
		return 505
	}
	return 400
}
