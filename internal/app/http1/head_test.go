package http1

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
		want *Request // nil: an error
	}{
		{"GET http://x/ HTTP/1.1\r\nHost: x\r\nA:  b c \t\r\n\r\n",
			&Request{"GET", "http://x/", 1, Header{{"Host", "x"}, {"A", "b c"}}}},
		{"CONNECT h:443 HTTP/1.0\n\n", &Request{"CONNECT", "h:443", 0, nil}},
		{"GET http://x/ HTTP/1.1\r\nhost: x\r\nEmpty:\r\nObs: caf\xe9\r\n\r\n",
			&Request{"GET", "http://x/", 1, Header{{"host", "x"}, {"Empty", ""}, {"Obs", "caf\xe9"}}}},
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
		got, err := ParseRequest([]byte(tc.head))
		if tc.want == nil {
			if err == nil || !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) {
				t.Errorf("%q: %+v %v, want ErrMalformed or ErrVersion", tc.head, got, err)
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
		want *Response
	}{
		{"HTTP/1.1 200 OK\r\nA: b\r\n\r\n", &Response{1, 200, "OK", Header{{"A", "b"}}}},
		{"HTTP/1.0 404 \r\n\r\n", &Response{0, 404, "", nil}},
		{"HTTP/1.1 204\r\n\r\n", &Response{1, 204, "", nil}},
		{"HTTP/1.1 599 Odd reason: yes\r\n\r\n", &Response{1, 599, "Odd reason: yes", nil}},
		{"HTTP/1.1 20 OK\r\n\r\n", nil},
		{"HTTP/1.1 099 OK\r\n\r\n", nil},
		{"HTTP/1.1 2000 OK\r\n\r\n", nil},
		{"HTTP/1.1 +20 OK\r\n\r\n", nil},
		{"HTTP/2 200 OK\r\n\r\n", nil},
		{"HTTP/1.1 200 O\x01K\r\n\r\n", nil},
	} {
		got, err := ParseResponse([]byte(tc.head))
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
		{"A\r\n" + strings.Repeat("b", 100) + "\r\n\r\n", "", ErrTooLarge},
		{strings.Repeat("\r\n", 60), "", ErrTooLarge}, // empty lines count
	} {
		// A small buffer makes the long lines come in fragments.
		br := bufio.NewReaderSize(strings.NewReader(tc.in), 16)
		got, err := ReadHead(br, 100)
		if !errors.Is(err, tc.err) || string(got) != tc.want {
			t.Errorf("%q: %q %v, want %q %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestVersions(t *testing.T) {
	for v, want := range map[string]error{
		"HTTP/1.1": nil, "HTTP/1.0": nil,
		"HTTP/1.2": ErrVersion, "HTTP/2.0": ErrVersion, "HTTP/0.9": ErrVersion,
		"HTTP/1.10": ErrMalformed, "http/1.1": ErrMalformed, "HTTP/2": ErrMalformed, "HTTP/x.1": ErrMalformed, "": ErrMalformed,
	} {
		_, err := ParseRequest([]byte("GET / " + v + "\r\nHost: h\r\n\r\n"))
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Errorf("%q: %v, want %v", v, err, want)
		}
	}
}

func TestContentLength(t *testing.T) {
	for _, tc := range []struct {
		h     Header
		n     int64
		ok    bool
		isErr bool
	}{
		{nil, 0, false, false},
		{Header{{"Content-Length", "0"}}, 0, true, false},
		{Header{{"content-length", "12"}, {"Content-Length", "12"}}, 12, true, false},
		{Header{{"Content-Length", "12, 12"}}, 12, true, false},
		{Header{{"Content-Length", "1"}, {"Content-Length", "2"}}, 0, false, true},
		{Header{{"Content-Length", "+1"}}, 0, false, true},
		{Header{{"Content-Length", ""}}, 0, false, true},
		{Header{{"Content-Length", "123456789012345678"}}, 123456789012345678, true, false},
		{Header{{"Content-Length", "1234567890123456789"}}, 0, false, true},
	} {
		n, ok, err := ContentLength(tc.h)
		if n != tc.n || ok != tc.ok || (err != nil) != tc.isErr || err != nil && !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: %d %v %v", tc.h, n, ok, err)
		}
	}
}

// FuzzParseHead: whatever ParseRequest takes, it writes back out as a head
// that parses the same; ParseResponse and ReadHead never panic.
func FuzzParseHead(f *testing.F) {
	f.Add([]byte("GET http://example.com/a?b HTTP/1.1\r\nHost: example.com\r\nContent-Length: 3\r\n\r\n"))
	f.Add([]byte("CONNECT [fd00::1]:443 HTTP/1.0\n\n"))
	f.Add([]byte("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: TE, close\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ParseResponse(data)
		head, err := ReadHead(bufio.NewReaderSize(bytes.NewReader(data), 16), 1<<10)
		if err != nil {
			return
		}
		r, err := ParseRequest(head)
		if err != nil {
			return
		}
		b := AppendRequestHead(nil, r.Method, r.Target, r.Header)
		if r.Minor == 0 {
			b = bytes.Replace(b, []byte(" HTTP/1.1\r\n"), []byte(" HTTP/1.0\r\n"), 1)
		}
		again, err := ParseRequest(b)
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("%q: %+v does not round-trip: %+v %v", head, r, again, err)
		}
		ContentLength(r.Header)
	})
}
