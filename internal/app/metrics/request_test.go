package metrics

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/app/http1"
)

func TestParseRequest(t *testing.T) {
	for _, c := range []struct {
		head string
		want request
		err  error
	}{
		{"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", request{method: "GET", path: "/metrics", minor: 1}, nil},
		{"HEAD /metrics?a=b HTTP/1.1\nhost:x\n\n", request{method: "HEAD", path: "/metrics", minor: 1}, nil},
		{"GET HTTP://h:1/metrics HTTP/1.1\r\nHost: h:1\r\n\r\n", request{method: "GET", path: "/metrics", minor: 1}, nil},
		{"GET http://h HTTP/1.1\r\nHost: h\r\n\r\n", request{method: "GET", path: "/", minor: 1}, nil},
		{"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", request{method: "OPTIONS", path: "*", minor: 1}, nil},
		{"GET /metrics HTTP/1.0\r\n\r\n", request{method: "GET", path: "/metrics", close: true}, nil},
		{"GET /metrics HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", request{method: "GET", path: "/metrics", close: true}, nil},
		{"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: TE, Close\r\n\r\n", request{method: "GET", path: "/metrics", minor: 1, close: true}, nil},
		{"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n", request{method: "GET", path: "/metrics", minor: 1}, nil},
		{"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n\r\n", request{method: "POST", path: "/metrics", minor: 1, hasBody: true}, nil},
		{"POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", request{method: "POST", path: "/metrics", minor: 1, hasBody: true}, nil},
		{"BREW /pot HTTP/1.1\r\nHost: x\r\nX-Empty:\r\nX-Obs: caf\xe9\t\r\n\r\n", request{method: "BREW", path: "/pot", minor: 1}, nil},

		{"GET /metrics HTTP/1.1\r\n\r\n", request{}, errMalformed},
		{"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", request{}, errMalformed},
		{"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: +1\r\n\r\n", request{}, errMalformed},
		{"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1234567890123456789\r\n\r\n", request{}, errMalformed},
		{"GET /metrics HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", request{}, errMalformed},
		{"GET /metrics HTTP/1.1\r\nHost: x\r\nX: a\x01b\r\n\r\n", request{}, errMalformed},
		{"GET /metrics HTTP/1.1\r\nHost: x\r\nX: a\rb\r\n\r\n", request{}, errMalformed},
		{"GET /metrics HTTP/1.1\r\nHost: x\r\n", request{}, errMalformed},
		{"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nextra", request{}, errMalformed},
		{"GET /metrics HTTP/1.1\r\nHost: x\r\n\tfolded\r\n\r\n", request{}, errMalformed},
		{"GET /métrics HTTP/1.1\r\nHost: x\r\n\r\n", request{}, errMalformed},
		{"GET ftp://h/metrics HTTP/1.1\r\nHost: x\r\n\r\n", request{}, errMalformed},
		{"GET /metrics HTTP/1.1", request{}, errMalformed},
		{"GET /metrics http/1.1\r\nHost: x\r\n\r\n", request{}, errMalformed},
		{"GET /metrics HTTP/1.10\r\nHost: x\r\n\r\n", request{}, errMalformed},
		{"GET /metrics HTTP/3.0\r\nHost: x\r\n\r\n", request{}, errVersion},
		{"", request{}, errMalformed},
		{"\n", request{}, errMalformed},
	} {
		got, err := parseRequest([]byte(c.head))
		if got != c.want || err != c.err {
			t.Errorf("parseRequest(%q) = %+v, %v; want %+v, %v", c.head, got, err, c.want, c.err)
		}
	}
}

// FuzzParseRequest: no input panics; what parses is well formed, and a
// request written back from it parses to the same.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
		"HEAD http://x/metrics?q HTTP/1.0\nConnection: keep-alive\n\n",
		"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := parseRequest(b)
		if err != nil {
			if errorStatus(err) < 400 {
				t.Fatalf("error %v answered %d", err, errorStatus(err))
			}
			return
		}
		if !http1.IsToken(req.method) || req.path != "*" && (req.path == "" || req.path[0] != '/') || req.minor > 1 {
			t.Fatalf("parsed %q to %+v", b, req)
		}
		conn := ""
		if req.close {
			conn = "Connection: close\r\n"
		}
		again := fmt.Sprintf("%s %s HTTP/1.%d\r\nHost: h\r\n%s\r\n", req.method, req.path, req.minor, conn)
		req2, err := parseRequest([]byte(again))
		req.hasBody = false
		if err != nil || req2 != req {
			t.Fatalf("%q parsed to %+v, written back as %q, which parses to %+v, %v", b, req, again, req2, err)
		}
	})
}

// chunkConn is a net.Conn that reads from data in chunks of the sizes
// given, then EOF; deadlines are accepted and ignored.
type chunkConn struct {
	net.Conn
	data  []byte
	sizes []byte
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := len(c.data)
	if len(c.sizes) > 0 {
		n = min(n, int(c.sizes[0])+1)
		c.sizes = c.sizes[1:]
	}
	n = copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func (c *chunkConn) SetReadDeadline(time.Time) error { return nil }

// FuzzReadHeads: a connection's bytes, arriving in any chunks, are read as
// heads within the limit, each ending in an empty line, whatever the input.
func FuzzReadHeads(f *testing.F) {
	f.Add([]byte("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n\r\nGET / HTTP/1.1\nHost: y\n\n"), []byte{3, 200, 0, 7})
	f.Add(bytes.Repeat([]byte("\r\n"), 40), []byte{1})
	f.Add(append([]byte("GET / HTTP/1.1\r\nX: "), bytes.Repeat([]byte("a"), 100)...), []byte{255})
	f.Fuzz(func(t *testing.T, data, sizes []byte) {
		const limit = 64
		cc := &chunkConn{data: data, sizes: sizes}
		c := &srvConn{nc: cc, br: bufio.NewReaderSize(cc, 16)}
		total := 0
		for first := true; ; first = false {
			if c.awaitRequest(time.Time{}) != nil {
				return
			}
			head, err := c.readHead(first, time.Second, limit)
			if err != nil {
				return
			}
			total += len(head)
			if len(head) > limit || !bytes.HasSuffix(head, []byte("\n\n")) && !bytes.HasSuffix(head, []byte("\n\r\n")) {
				t.Fatalf("head %q", head)
			}
			if total > len(data) {
				t.Fatalf("%d bytes of heads from %d of input", total, len(data))
			}
			parseRequest(head)
		}
	})
}
