package httpproxy

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/fips-go/fips-go/internal/app/http1"
)

// Body framing (RFC 9112 section 6): how long a message body is.
type bodyKind int

const (
	bodyNone       bodyKind = iota // no body
	bodyLength                     // Content-Length bytes
	bodyChunked                    // chunked transfer coding
	bodyUntilClose                 // a response read until the connection ends
)

// framing is a body's kind and, for bodyLength, its length.
type framing struct {
	kind bodyKind
	n    int64
}

// Limits of the lines inside a chunked body.
const (
	maxChunkLine = 4 << 10 // chunk-size with its extensions
	maxTrailer   = maxHeaderBytes
)

// requestFraming finds the body of a request. Both Content-Length and
// Transfer-Encoding is an error, not the precedence of section 6.3: the
// combination is how requests are smuggled past proxies.
func requestFraming(r *request) (framing, error) {
	n, hasLen, err := http1.ContentLength(r.Header)
	if err != nil {
		return framing{}, err
	}
	if r.Header.Has("Transfer-Encoding") {
		switch {
		case hasLen:
			return framing{}, fmt.Errorf("%w: both Content-Length and Transfer-Encoding", http1.ErrMalformed)
		case r.Minor == 0:
			return framing{}, fmt.Errorf("%w: Transfer-Encoding in an HTTP/1.0 request", http1.ErrMalformed)
		case !onlyChunked(r.Header):
			return framing{}, fmt.Errorf("%w: %.64q", http1.ErrUnsupported, r.Header.Values("Transfer-Encoding"))
		}
		return framing{kind: bodyChunked}, nil
	}
	if n == 0 {
		return framing{}, nil
	}
	return framing{kind: bodyLength, n: n}, nil
}

// responseFraming finds the body of a response to method (section 6.3).
func responseFraming(method string, status int, h Header) (framing, error) {
	if method == "HEAD" || status < 200 || status == 204 || status == 304 {
		return framing{}, nil
	}
	if h.Has("Transfer-Encoding") {
		// Chunked wins over Content-Length here; we re-frame what we
		// send on. Any other coding we could only pass on read until
		// close, and its decoding would be lost with the hop-by-hop
		// field: refuse it.
		if !onlyChunked(h) {
			return framing{}, fmt.Errorf("%w: %.64q", http1.ErrUnsupported, h.Values("Transfer-Encoding"))
		}
		return framing{kind: bodyChunked}, nil
	}
	n, hasLen, err := http1.ContentLength(h)
	switch {
	case err != nil:
		return framing{}, err
	case !hasLen:
		return framing{kind: bodyUntilClose}, nil
	case n == 0:
		return framing{}, nil
	}
	return framing{kind: bodyLength, n: n}, nil
}

// onlyChunked reports whether Transfer-Encoding is exactly "chunked".
func onlyChunked(h Header) bool {
	n, chunked := 0, false
	h.EachToken("Transfer-Encoding", func(t string) {
		n++
		chunked = http1.EqualFold(t, "chunked")
	})
	return n == 1 && chunked
}

// lengthReader reads exactly n bytes of r; ending early is
// io.ErrUnexpectedEOF, so a short body is never taken for a whole one.
type lengthReader struct {
	r io.Reader
	n int64
}

func (l *lengthReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	k, err := l.r.Read(p)
	l.n -= int64(k)
	if err == io.EOF && l.n > 0 {
		err = io.ErrUnexpectedEOF
	}
	return k, err
}

// chunkedReader decodes a chunked body (RFC 9112 section 7.1):
//
//	*( chunk-size [ chunk-ext ] CRLF chunk-data CRLF )
//	"0" [ chunk-ext ] CRLF
//	*( field-line CRLF )
//	CRLF
//
// Extensions and trailer fields are read and dropped. It returns io.EOF
// only after the last chunk and the trailer section.
type chunkedReader struct {
	br   *bufio.Reader
	left int64 // bytes of the current chunk's data not read yet
	crlf bool  // the current chunk's data is read; its CRLF is not
	err  error // sticky: io.EOF once the body has ended
}

func (cr *chunkedReader) Read(p []byte) (int, error) {
	for cr.err == nil {
		switch {
		case cr.left > 0:
			if len(p) == 0 {
				return 0, nil
			}
			if int64(len(p)) > cr.left {
				p = p[:cr.left]
			}
			n, err := cr.br.Read(p)
			cr.left -= int64(n)
			cr.crlf = cr.left == 0
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			cr.err = err
			return n, err
		case cr.crlf:
			cr.crlf = false
			if line, err := http1.ReadLine(cr.br, maxChunkLine); err != nil {
				cr.err = err
			} else if len(line) != 0 {
				cr.err = fmt.Errorf("%w: chunk data longer than its size", http1.ErrMalformed)
			}
		default:
			line, err := http1.ReadLine(cr.br, maxChunkLine)
			if err == nil {
				cr.left, err = parseChunkSize(string(line))
			}
			switch {
			case err != nil:
				cr.err = err
			case cr.left == 0:
				cr.err = skipTrailer(cr.br)
				if cr.err == nil {
					cr.err = io.EOF
				}
			}
		}
	}
	return 0, cr.err
}

// parseChunkSize parses a chunk-size line without its line end.
func parseChunkSize(line string) (int64, error) {
	size, _, _ := strings.Cut(line, ";")
	size = strings.TrimRight(size, " \t") // BWS before an extension
	var n int64
	for i := 0; i < len(size); i++ {
		c := size[i]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c|0x20 && c|0x20 <= 'f': // c|0x20 lowers a letter
			d = c | 0x20 - 'a' + 10
		default:
			return 0, fmt.Errorf("%w: bad chunk size %.32q", http1.ErrMalformed, line)
		}
		if n > 1<<58 {
			return 0, fmt.Errorf("%w: chunk size %.32q too large", http1.ErrMalformed, line)
		}
		n = n<<4 | int64(d)
	}
	if size == "" {
		return 0, fmt.Errorf("%w: empty chunk size", http1.ErrMalformed)
	}
	return n, nil
}

// skipTrailer reads the trailer section up to its empty line; a proxy
// may drop trailer fields (RFC 9110 section 6.5.1), and we do.
func skipTrailer(br *bufio.Reader) error {
	total := 0
	for {
		line, err := http1.ReadLine(br, maxTrailer)
		if err != nil {
			return err
		}
		if len(line) == 0 {
			return nil
		}
		if total += len(line) + 2; total > maxTrailer {
			return fmt.Errorf("%w: trailer over %d bytes", http1.ErrTooLarge, maxTrailer)
		}
		if _, err := http1.ParseField(string(line)); err != nil {
			return err
		}
	}
}

// writeChunk writes p as one chunk; empty p writes nothing, as an empty
// chunk would end the body.
func writeChunk(w *bufio.Writer, p []byte) error {
	if len(p) == 0 {
		return nil
	}
	var size [20]byte
	w.Write(strconv.AppendInt(size[:0], int64(len(p)), 16))
	w.WriteString("\r\n")
	w.Write(p)
	_, err := w.WriteString("\r\n")
	return err
}

// lastChunk ends a chunked body, with no trailer fields.
const lastChunk = "0\r\n\r\n"
