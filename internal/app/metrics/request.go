package metrics

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/fips-go/fips-go/internal/app/http1"
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

// parseRequest parses a head as http1.ReadHead delimits it (with package
// http1, as the HTTP proxy does) and keeps what the server uses. Bad
// input returns one of the sentinel errors, never a panic.
func parseRequest(head []byte) (request, error) {
	r, err := http1.ParseRequest(head)
	switch {
	case errors.Is(err, http1.ErrVersion):
		return request{}, errVersion
	case errors.Is(err, http1.ErrTooLarge):
		return request{}, errHeadTooLarge
	case err != nil:
		return request{}, errMalformed
	}
	path, ok := targetPath(r.Target)
	if !ok {
		return request{}, errMalformed
	}
	length, _, err := http1.ContentLength(r.Header)
	if err != nil {
		return request{}, errMalformed
	}
	req := request{method: r.Method, path: path, minor: r.Minor}
	if r.Header.Has("Transfer-Encoding") {
		if r.Minor == 0 {
			return request{}, errMalformed // RFC 9112 section 6.1
		}
		req.hasBody = true
	}
	req.hasBody = req.hasBody || length > 0
	req.close = r.Minor == 0 || r.Header.HasToken("Connection", "close")
	return req, nil
}

// targetPath is the path of an origin-form (/metrics?x), absolute-form
// (http://host/metrics) or asterisk-form (*) target; only ASCII.
func targetPath(t string) (string, bool) {
	for i := 0; i < len(t); i++ {
		if t[i] >= 0x7f {
			return "", false
		}
	}
	if t == "*" {
		return t, true
	}
	for _, scheme := range []string{"http://", "https://"} {
		if len(t) >= len(scheme) && http1.EqualFold(t[:len(scheme)], scheme) {
			t = t[len(scheme):]
			i := strings.IndexByte(t, '/')
			if i < 0 {
				return "/", true
			}
			t = t[i:]
			break
		}
	}
	if t == "" || t[0] != '/' {
		return "", false
	}
	if i := strings.IndexByte(t, '?'); i >= 0 {
		t = t[:i]
	}
	return t, true
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
