package httpproxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/fips-go/fips-go/internal/app/http1"
)

func TestChunkedReader(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      error // after want
	}{
		{"3\r\nabc\r\n0\r\n\r\nnext", "abc", nil},
		{"A;ext=\"v\"\r\n0123456789\r\n1 ;e\r\nx\r\n0\r\nT: v\r\nU: w\r\n\r\n", "0123456789x", nil},
		{"3\nabc\n0\n\n", "abc", nil},
		{"00003\r\nabc\r\n000\r\n\r\n", "abc", nil},
		{"3\r\nabc\r\n", "abc", io.ErrUnexpectedEOF},
		{"3\r\nab", "ab", io.ErrUnexpectedEOF},
		{"3\r\nabcd\r\n0\r\n\r\n", "abc", http1.ErrMalformed},
		{"\r\n", "", http1.ErrMalformed},
		{"-3\r\nabc\r\n", "", http1.ErrMalformed},
		{"0x3\r\nabc\r\n", "", http1.ErrMalformed},
		{"fffffffffffffffff\r\n", "", http1.ErrMalformed},
		{"0\r\nbad trailer\r\n\r\n", "", http1.ErrMalformed},
		{strings.Repeat("0", 5000) + "\r\n", "", http1.ErrTooLarge},
	} {
		br := bufio.NewReaderSize(strings.NewReader(tc.in), 16)
		got, err := io.ReadAll(&chunkedReader{br: br})
		if string(got) != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("%q: %q %v, want %q %v", tc.in, got, err, tc.want, tc.err)
		}
		// The reader stops at the end of the body.
		if rest, _ := io.ReadAll(br); tc.err == nil && strings.HasSuffix(tc.in, "next") != (string(rest) == "next") {
			t.Errorf("%q: left %q", tc.in, rest)
		}
	}
}

func TestFraming(t *testing.T) {
	req := func(minor int, fields ...string) *request {
		r := &request{Method: "POST", Minor: minor}
		for i := 0; i < len(fields); i += 2 {
			r.Header.Add(fields[i], fields[i+1])
		}
		return r
	}
	for _, tc := range []struct {
		r    *request
		want framing
		err  error
	}{
		{req(1), framing{}, nil},
		{req(1, "Content-Length", "0"), framing{}, nil},
		{req(1, "Content-Length", "12"), framing{bodyLength, 12}, nil},
		{req(1, "Content-Length", "12, 12", "content-length", "12"), framing{bodyLength, 12}, nil},
		{req(1, "Content-Length", "12", "Content-Length", "13"), framing{}, http1.ErrMalformed},
		{req(1, "Content-Length", ""), framing{}, http1.ErrMalformed},
		{req(1, "Content-Length", "+1"), framing{}, http1.ErrMalformed},
		{req(1, "Content-Length", "1e3"), framing{}, http1.ErrMalformed},
		{req(1, "Content-Length", "9999999999999999999"), framing{}, http1.ErrMalformed},
		{req(1, "Transfer-Encoding", "Chunked"), framing{kind: bodyChunked}, nil},
		{req(1, "Transfer-Encoding", "gzip, chunked"), framing{}, http1.ErrUnsupported},
		{req(1, "Transfer-Encoding", "chunked", "Transfer-Encoding", "chunked"), framing{}, http1.ErrUnsupported},
		{req(1, "Transfer-Encoding", "chunked", "Content-Length", "1"), framing{}, http1.ErrMalformed},
		{req(0, "Transfer-Encoding", "chunked"), framing{}, http1.ErrMalformed},
	} {
		got, err := requestFraming(tc.r)
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("%q: %+v %v, want %+v %v", tc.r.Header, got, err, tc.want, tc.err)
		}
	}
	for _, tc := range []struct {
		method string
		status int
		h      Header
		want   framing
		err    error
	}{
		{"GET", 200, nil, framing{kind: bodyUntilClose}, nil},
		{"HEAD", 200, hdr("Content-Length", "5"), framing{}, nil},
		{"GET", 204, nil, framing{}, nil},
		{"GET", 304, hdr("Content-Length", "5"), framing{}, nil},
		{"GET", 200, hdr("Content-Length", "5"), framing{bodyLength, 5}, nil},
		{"GET", 200, hdr("Content-Length", "5", "Transfer-Encoding", "chunked"), framing{kind: bodyChunked}, nil},
		{"GET", 200, hdr("Transfer-Encoding", "gzip"), framing{}, http1.ErrUnsupported},
		{"GET", 200, hdr("Content-Length", "x"), framing{}, http1.ErrMalformed},
	} {
		got, err := responseFraming(tc.method, tc.status, tc.h)
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("%s %d %q: %+v %v, want %+v %v", tc.method, tc.status, tc.h, got, err, tc.want, tc.err)
		}
	}
}

func TestLengthReader(t *testing.T) {
	got, err := io.ReadAll(&lengthReader{r: strings.NewReader("abcdef"), n: 4})
	if string(got) != "abcd" || err != nil {
		t.Errorf("%q %v", got, err)
	}
	got, err = io.ReadAll(&lengthReader{r: strings.NewReader("ab"), n: 4})
	if string(got) != "ab" || err != io.ErrUnexpectedEOF {
		t.Errorf("short: %q %v", got, err)
	}
}

// encodeChunked encodes p in chunks of at most size bytes.
func encodeChunked(p []byte, size int) []byte {
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	for len(p) > 0 {
		n := min(len(p), size)
		writeChunk(w, p[:n])
		p = p[n:]
	}
	w.WriteString(lastChunk)
	w.Flush()
	return b.Bytes()
}

func FuzzChunkedReader(f *testing.F) {
	f.Add([]byte("3\r\nabc\r\n0\r\n\r\n"))
	f.Add([]byte("a;x=y\r\n0123456789\r\n0\r\nTrailer: v\r\n\r\n"))
	f.Add([]byte("3\nabc\n0\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(data), 16)
		got, err := io.ReadAll(&chunkedReader{br: br})
		if len(got) > len(data) {
			t.Fatalf("%q: decoded %d bytes from %d", data, len(got), len(data))
		}
		if err != nil {
			return
		}
		// A body that decodes re-encodes to one that decodes the same.
		for _, size := range []int{1, 7, 1 << 20} {
			enc := encodeChunked(got, size)
			again, err := io.ReadAll(&chunkedReader{br: bufio.NewReader(bytes.NewReader(enc))})
			if err != nil || !bytes.Equal(again, got) {
				t.Fatalf("%q: %q re-encoded as %q decodes to %q %v", data, got, enc, again, err)
			}
		}
	})
}
