package streamframe

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzParse feeds arbitrary bytes to Parse and to Reader: neither may
// panic, both must agree frame by frame, and every frame found must
// re-encode to the bytes it came from.
func FuzzParse(f *testing.F) {
	seed, _ := Append(nil, bytes.Repeat([]byte{1}, 148))
	seed, _ = Append(seed, []byte{4, 0, 0, 0})
	f.Add(seed)
	f.Add([]byte{0, 0})
	f.Add([]byte{0xff, 0xff, 1})
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(bytes.NewReader(b))
		rest := b
		for {
			p, next, err := Parse(rest)
			q, rerr := r.Next()
			if err != nil {
				switch {
				case errors.Is(err, ErrEmpty) && !errors.Is(rerr, ErrEmpty):
					t.Fatalf("Parse: %v, Reader: %v", err, rerr)
				case errors.Is(err, ErrIncomplete) && rerr != io.EOF && rerr != io.ErrUnexpectedEOF:
					t.Fatalf("Parse: %v, Reader: %v", err, rerr)
				}
				return
			}
			if rerr != nil || !bytes.Equal(p, q) {
				t.Fatalf("Parse found %d bytes, Reader %d (%v)", len(p), len(q), rerr)
			}
			re, aerr := Append(nil, p)
			if aerr != nil || !bytes.Equal(re, rest[:len(rest)-len(next)]) {
				t.Fatalf("frame does not re-encode to its bytes: %v", aerr)
			}
			rest = next
		}
	})
}
