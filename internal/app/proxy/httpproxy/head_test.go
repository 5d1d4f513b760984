package httpproxy

import (
	"bufio"
	"bytes"
	"reflect"
	"testing"

	"github.com/fips-go/fips-go/internal/app/http1"
)

func TestOriginForm(t *testing.T) {
	for in, want := range map[string]string{
		"http://h":              "/",
		"http://h:80":           "/",
		"http://h/":             "/",
		"http://h/a/b?c=d#e":    "/a/b?c=d",
		"http://h?q":            "/?q",
		"http://h#f":            "/",
		"http://u@h/p%20q":      "/p%20q",
		"HTTP://[::1]:8/x//y?#": "/x//y?",
	} {
		if got := originForm(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func TestRemoveHopByHop(t *testing.T) {
	h := hdr("Connection", "x-a, ,X-B", "connection", "close", "X-A", "1", "x-b", "2",
		"Keep-Alive", "1", "TE", "trailers", "Transfer-Encoding", "chunked", "Proxy-Connection", "k",
		"Proxy-Authorization", "p", "Proxy-Authenticate", "p", "Trailer", "t", "Upgrade", "u",
		"Kept", "1", "\u212aeep", "not a token but kept")
	RemoveHopByHop(&h)
	want := hdr("Kept", "1", "\u212aeep", "not a token but kept")
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("%q, want %q", h, want)
	}
}

// hdr makes a Header of name, value pairs.
func hdr(kv ...string) Header {
	var h Header
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// appendHead encodes r as http1.ParseRequest reads it.
func appendHead(r *request) []byte {
	b := http1.AppendRequestHead(nil, r.Method, r.Target, r.Header)
	if r.Minor == 0 {
		b = bytes.Replace(b, []byte(" HTTP/1.1\r\n"), []byte(" HTTP/1.0\r\n"), 1)
	}
	return b
}

func FuzzParseRequest(f *testing.F) {
	f.Add([]byte("GET http://example.com/a?b HTTP/1.1\r\nHost: example.com\r\nContent-Length: 3\r\n\r\n"))
	f.Add([]byte("CONNECT [fd00::1]:443 HTTP/1.0\n\n"))
	f.Add([]byte("\r\nPOST http://x/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: a, b\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		http1.ParseResponse(data)
		head, err := http1.ReadHead(bufio.NewReaderSize(bytes.NewReader(data), 16), 1<<10)
		if err != nil {
			return
		}
		if len(head) > len(data) || !bytes.Contains(data, head) {
			t.Fatalf("head %q is not from %q", head, data)
		}
		r, err := http1.ParseRequest(head)
		if err != nil {
			return
		}
		// What we parsed encodes to a head that parses the same.
		again, err := http1.ParseRequest(appendHead(r))
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("%q: %+v does not round-trip: %+v %v", head, r, again, err)
		}
		// The framing decisions never panic, and a length is sane.
		if fr, err := requestFraming(r); err == nil && fr.kind == bodyLength && fr.n <= 0 {
			t.Fatalf("%q: framing %+v", head, fr)
		}
		if fr, err := responseFraming(r.Method, 200, r.Header); err == nil && fr.kind == bodyLength && fr.n <= 0 {
			t.Fatalf("%q: response framing %+v", head, fr)
		}
		h := r.Header.Clone()
		RemoveHopByHop(&h)
		if h.Has("Connection") || h.Has("Transfer-Encoding") {
			t.Fatalf("%q: hop-by-hop left: %q", head, h)
		}
	})
}
