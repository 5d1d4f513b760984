package conn

import (
	"errors"
	"strings"
	"testing"
)

func TestParseConnectResponse(t *testing.T) {
	ok := "HTTP/1.1 200 Connection established\r\nProxy-Agent: x\r\n\r\n"
	if n, err := parseConnectResponse([]byte(ok + "early")); err != nil || n != len(ok) {
		t.Fatalf("200: %d %v", n, err)
	}
	if n, err := parseConnectResponse([]byte("HTTP/1.0 200 OK\n\n")); err != nil || n != 17 {
		t.Fatalf("bare LF: %d %v", n, err)
	}
	for _, in := range []string{"", "HTTP/1.1 200 OK\r\n", "HTTP/1.1 2"} {
		if _, err := parseConnectResponse([]byte(in)); !errors.Is(err, errProxyIncomplete) {
			t.Errorf("%q: %v, want incomplete", in, err)
		}
	}
	for _, in := range []string{"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n", "HTTP/1.1 502 Bad Gateway\r\n\r\n",
		"SSH-2.0-x\r\n\r\n", "HTTP/1.1 20 OK\r\n\r\n", "HTTP/1.1 2000 OK\r\n\r\n", "HTTP/2 200\r\n\r\n",
		"HTTP/1.1 200 OK\r\n" + strings.Repeat("X: y\r\n", 1000)} {
		_, err := parseConnectResponse([]byte(in))
		if !errors.Is(err, ErrProxy) {
			t.Errorf("%.40q: %v, want ErrProxy", in, err)
		}
	}
}

func FuzzParseConnectResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n\r\n"))
	f.Add([]byte("HTTP/1.0 200 OK\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := parseConnectResponse(b)
		switch {
		case err == nil && (n <= 0 || n > len(b) || n > maxProxyResponse):
			t.Fatalf("header length %d of %d bytes", n, len(b))
		case err != nil && n != 0:
			t.Fatalf("error %v with length %d", err, n)
		case err == nil && !strings.HasPrefix(string(b), "HTTP/1."):
			t.Fatalf("accepted %q", b)
		}
	})
}
