package streamframe

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestAppendParse(t *testing.T) {
	var b []byte
	var err error
	msgs := [][]byte{{1}, bytes.Repeat([]byte{2}, 148), bytes.Repeat([]byte{3}, MaxPayload)}
	for _, m := range msgs {
		if b, err = Append(b, m); err != nil {
			t.Fatal(err)
		}
	}
	if b[0] != 0 || b[1] != 1 || b[2] != 1 || b[3] != 0 || b[4] != 148 {
		t.Fatalf("header bytes % x", b[:5])
	}
	for i, m := range msgs {
		var p []byte
		if p, b, err = Parse(b); err != nil || !bytes.Equal(p, m) {
			t.Fatalf("frame %d: %v, %d bytes", i, err, len(p))
		}
	}
	if _, _, err := Parse(b); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("empty rest: %v", err)
	}
}

func TestAppendRefuses(t *testing.T) {
	dst := []byte{9}
	if out, err := Append(dst, nil); !errors.Is(err, ErrEmpty) || len(out) != 1 {
		t.Fatalf("empty: %v %d", err, len(out))
	}
	if out, err := Append(dst, make([]byte, MaxPayload+1)); !errors.Is(err, ErrTooLong) || len(out) != 1 {
		t.Fatalf("too long: %v %d", err, len(out))
	}
}

func TestParseBad(t *testing.T) {
	if _, _, err := Parse([]byte{0, 0, 1}); !errors.Is(err, ErrEmpty) {
		t.Fatalf("zero length: %v", err)
	}
	if _, _, err := Parse([]byte{0, 5, 1, 2}); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("short: %v", err)
	}
	if _, _, err := Parse([]byte{0}); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("half header: %v", err)
	}
}

// oneByte hands out its input a byte per Read, the worst a TCP stream
// does.
type oneByte struct{ b []byte }

func (o *oneByte) Read(p []byte) (int, error) {
	if len(o.b) == 0 {
		return 0, io.EOF
	}
	p[0] = o.b[0]
	o.b = o.b[1:]
	return 1, nil
}

func TestReader(t *testing.T) {
	var b []byte
	for n := 1; n < 300; n += 37 {
		b, _ = Append(b, bytes.Repeat([]byte{byte(n)}, n))
	}
	for _, src := range []io.Reader{bytes.NewReader(b), &oneByte{b}} {
		r := NewReader(src)
		for n := 1; n < 300; n += 37 {
			p, err := r.Next()
			if err != nil || len(p) != n || p[0] != byte(n) {
				t.Fatalf("frame %d: %v len %d", n, err, len(p))
			}
		}
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("end: %v", err)
		}
	}
}

func TestReaderBuffered(t *testing.T) {
	b, _ := Append(nil, []byte("ab"))
	b, _ = Append(b, []byte("cde"))
	b = append(b, 0, 9, 1) // a third frame, cut short
	r := NewReader(bytes.NewReader(b))
	if p, err := r.Next(); err != nil || string(p) != "ab" {
		t.Fatalf("first: %q %v", p, err)
	}
	if !r.Buffered() {
		t.Fatal("second frame is buffered but Buffered says no")
	}
	if p, _ := r.Next(); string(p) != "cde" {
		t.Fatalf("second: %q", p)
	}
	if r.Buffered() {
		t.Fatal("third frame is incomplete but Buffered says yes")
	}
	if _, err := r.Next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("cut frame: %v", err)
	}
}

func TestReaderEmptyFrame(t *testing.T) {
	r := NewReader(bytes.NewReader([]byte{0, 1, 7, 0, 0}))
	if p, err := r.Next(); err != nil || len(p) != 1 {
		t.Fatal(err)
	}
	if _, err := r.Next(); !errors.Is(err, ErrEmpty) {
		t.Fatalf("zero length: %v", err)
	}
}
