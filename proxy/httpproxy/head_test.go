package httpproxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestParseRequest(t *testing.T) {
	for _, tc := range []struct {
		head string
		want *request // nil: an error
	}{
		{"GET http://x/ HTTP/1.1\r\nHost: x\r\nA:  b c \t\r\n\r\n",
			&request{"GET", "http://x/", 1, Header{{"Host", "x"}, {"A", "b c"}}}},
		{"CONNECT h:443 HTTP/1.0\n\n", &request{"CONNECT", "h:443", 0, nil}},
		{"GET http://x/ HTTP/1.1\r\nhost: x\r\nEmpty:\r\nObs: caf\xe9\r\n\r\n",
			&request{"GET", "http://x/", 1, Header{{"host", "x"}, {"Empty", ""}, {"Obs", "caf\xe9"}}}},
		{"GET http://x/ HTTP/1.1\r\n\r\n", nil},                       // no Host
		{"GET http://x/ HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", nil}, // two
		{"GET http://x/ HTTP/1.1\r\nHost: x\r\n", nil},                // no empty line
		{"GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\nGET", nil},         // bytes after
		{"GET http://x/ http/1.1\r\nHost: x\r\n\r\n", nil},
		{"GET http://x/ HTTP/1.2\r\nHost: x\r\n\r\n", nil},
		{"GET http://x/ HTTP/0.9\r\n\r\n", nil},
		{"G(T http://x/ HTTP/1.1\r\nHost: x\r\n\r\n", nil},
		{"GET http://x/\x7f HTTP/1.1\r\nHost: x\r\n\r\n", nil},
		{"GET http://x/ HTTP/1.1\r\nHost: x\r\n\tfolded\r\n\r\n", nil},
		{"GET http://x/ HTTP/1.1\r\nHost: x\r\nNo colon\r\n\r\n", nil},
		{"GET http://x/ HTTP/1.1\r\nHost: x\r\n: empty name\r\n\r\n", nil},
		{"GET http://x/ HTTP/1.1\r\nHost: x\r\nA: b\rc\r\n\r\n", nil},
		{"GET http://x/ HTTP/1.1\r\nHost: x\r\nA: b\x00\r\n\r\n", nil},
		{"", nil},
	} {
		got, err := parseRequest([]byte(tc.head))
		if tc.want == nil {
			if err == nil || !errors.Is(err, errMalformed) {
				t.Errorf("%q: %+v %v, want errMalformed", tc.head, got, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %+v %v, want %+v", tc.head, got, err, tc.want)
		}
	}
}

func TestParseResponse(t *testing.T) {
	for _, tc := range []struct {
		head string
		want *response
	}{
		{"HTTP/1.1 200 OK\r\nA: b\r\n\r\n", &response{1, 200, "OK", Header{{"A", "b"}}}},
		{"HTTP/1.0 404 \r\n\r\n", &response{0, 404, "", nil}},
		{"HTTP/1.1 204\r\n\r\n", &response{1, 204, "", nil}},
		{"HTTP/1.1 599 Odd reason: yes\r\n\r\n", &response{1, 599, "Odd reason: yes", nil}},
		{"HTTP/1.1 20 OK\r\n\r\n", nil},
		{"HTTP/1.1 099 OK\r\n\r\n", nil},
		{"HTTP/1.1 2000 OK\r\n\r\n", nil},
		{"HTTP/1.1 +20 OK\r\n\r\n", nil},
		{"HTTP/2 200 OK\r\n\r\n", nil},
		{"HTTP/1.1 200 O\x01K\r\n\r\n", nil},
	} {
		got, err := parseResponse([]byte(tc.head))
		if (tc.want == nil) != (err != nil) || (err == nil && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("%q: %+v %v, want %+v", tc.head, got, err, tc.want)
		}
	}
}

func TestReadHead(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      error
	}{
		{"\r\n\nA\r\nB\r\n\r\nbody", "A\r\nB\r\n\r\n", nil},
		{"A\nB\n\nbody", "A\nB\n\n", nil},
		{"", "", io.EOF},
		{"A\r\nB", "", io.ErrUnexpectedEOF},
		{"\r\n", "", io.ErrUnexpectedEOF},
		{"A\r\n" + strings.Repeat("b", 100) + "\r\n\r\n", "", errTooLarge},
		{strings.Repeat("\r\n", 60), "", errTooLarge}, // empty lines count
	} {
		// A small buffer makes the long lines come in fragments.
		br := bufio.NewReaderSize(strings.NewReader(tc.in), 16)
		got, err := readHead(br, 100)
		if !errors.Is(err, tc.err) || string(got) != tc.want {
			t.Errorf("%q: %q %v, want %q %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

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
	h := Header{{"Connection", "x-a, ,X-B"}, {"connection", "close"}, {"X-A", "1"}, {"x-b", "2"},
		{"Keep-Alive", "1"}, {"TE", "trailers"}, {"Transfer-Encoding", "chunked"}, {"Proxy-Connection", "k"},
		{"Proxy-Authorization", "p"}, {"Proxy-Authenticate", "p"}, {"Trailer", "t"}, {"Upgrade", "u"},
		{"Kept", "1"}, {"\u212aeep", "not a token but kept"}}
	RemoveHopByHop(&h)
	want := Header{{"Kept", "1"}, {"\u212aeep", "not a token but kept"}}
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("%q, want %q", h, want)
	}
}

// appendHead encodes r as parseRequest reads it.
func appendHead(r *request) []byte {
	b := appendRequestHead(nil, r.Method, r.Target, r.Header)
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
		parseResponse(data)
		head, err := readHead(bufio.NewReaderSize(bytes.NewReader(data), 16), 1<<10)
		if err != nil {
			return
		}
		if len(head) > len(data) || !bytes.Contains(data, head) {
			t.Fatalf("head %q is not from %q", head, data)
		}
		r, err := parseRequest(head)
		if err != nil {
			return
		}
		// What we parsed encodes to a head that parses the same.
		again, err := parseRequest(appendHead(r))
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
