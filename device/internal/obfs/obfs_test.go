package obfs

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/fips-go/fips-go/device/noise"
)

// sample is the configuration the interop tests use.
var sample = Params{Jc: 4, Jmin: 40, Jmax: 70, S1: 52, S2: 37, H: [4]uint32{1234567891, 1234567892, 1234567893, 1234567894}}

// wrap lays out a message of standard type typ as a sender does: padding
// (filled with fill), then the body with the configured type word.
func wrap(p *Params, typ uint32, body []byte, fill byte) []byte {
	pad := p.Padding(typ)
	out := make([]byte, pad, pad+len(body))
	for i := range out {
		out[i] = fill
	}
	out = append(out, body...)
	p.SetType(out[pad:], typ)
	return out
}

func body(typ uint32, n int) []byte {
	b := make([]byte, n)
	binary.LittleEndian.PutUint32(b, typ)
	for i := 4; i < n; i++ {
		b[i] = byte(i)
	}
	return b
}

func TestClassifyRoundTrip(t *testing.T) {
	cases := []struct {
		typ uint32
		n   int
	}{
		{noise.TypeInitiation, noise.InitiationSize},
		{noise.TypeResponse, noise.ResponseSize},
		{noise.TypeCookieReply, noise.CookieReplySize},
		{noise.TypeTransport, noise.TransportOverhead},
		{noise.TypeTransport, 1452},
	}
	for _, p := range []Params{{}, sample, {S1: 10}, {H: [4]uint32{5, 6, 7, 8}}, {Jc: 3, Jmax: 10}} {
		for _, c := range cases {
			// Padding made of the type word: a classifier that looked at
			// the first bytes would be fooled.
			w := wrap(&p, c.typ, body(c.typ, c.n), byte(p.Type(c.typ)))
			typ, off, ok := p.Classify(w)
			if !ok || typ != c.typ || off != p.Padding(c.typ) {
				t.Errorf("%+v: type %d size %d: got (%d, %d, %v), want (%d, %d, true)", p, c.typ, c.n, typ, off, ok, c.typ, p.Padding(c.typ))
			}
		}
	}
}

func TestClassifyRejects(t *testing.T) {
	p := sample
	for name, b := range map[string][]byte{
		"plain initiation":     body(noise.TypeInitiation, noise.InitiationSize),
		"plain response":       body(noise.TypeResponse, noise.ResponseSize),
		"plain transport":      body(noise.TypeTransport, 100),
		"unpadded initiation":  wrap(&Params{H: p.H}, noise.TypeInitiation, body(1, noise.InitiationSize), 0),
		"initiation too short": wrap(&p, noise.TypeInitiation, body(1, noise.InitiationSize-1), 0),
		"short transport":      wrap(&p, noise.TypeTransport, body(4, noise.TransportOverhead-1), 0),
		"cookie reply size":    wrap(&p, noise.TypeCookieReply, body(3, noise.CookieReplySize+1), 0),
		"junk":                 make([]byte, 60),
		"empty":                nil,
		"three bytes":          {1, 2, 3},
	} {
		if typ, off, ok := p.Classify(b); ok {
			t.Errorf("%s: accepted as type %d at %d", name, typ, off)
		}
	}
	// Off: exactly the standard classification.
	var off Params
	if typ, _, ok := off.Classify(body(noise.TypeInitiation, noise.InitiationSize)); !ok || typ != 1 {
		t.Errorf("off: plain initiation not accepted")
	}
}

// A transport message that happens to be as long as a padded initiation
// is still transport (amneziawg-go falls back to the first type word).
func TestClassifyTransportOfHandshakeSize(t *testing.T) {
	p := sample
	b := wrap(&p, noise.TypeTransport, body(4, noise.InitiationSize+p.S1), 0)
	if typ, off, ok := p.Classify(b); !ok || typ != noise.TypeTransport || off != 0 {
		t.Fatalf("got (%d, %d, %v)", typ, off, ok)
	}
}

func TestValidate(t *testing.T) {
	good := []Params{{}, sample, {H: [4]uint32{1, 2, 3, 4}}, {H: [4]uint32{0, 0, 0, 9}}, {Jc: 128, Jmin: 1280, Jmax: 1280}, {S1: MaxS1, S2: MaxS2 - 1}}
	for _, p := range good {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
	bad := []Params{
		{Jc: -1}, {Jc: 129}, {Jmin: -1}, {Jmin: 10, Jmax: 5}, {Jmax: 1281},
		{S1: -1}, {S1: MaxS1 + 1}, {S2: MaxS2 + 1}, {S1: 0, S2: 56}, {S1: 10, S2: 66},
		{H: [4]uint32{2, 0, 0, 0}}, {H: [4]uint32{5, 5, 0, 0}}, {H: [4]uint32{0, 0, 0, 3}}, {H: [4]uint32{7, 0, 0, 7}},
	}
	for _, p := range bad {
		err := p.Validate()
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: got %v, want ErrInvalid", p, err)
		}
	}
}

func TestJunkSize(t *testing.T) {
	p := Params{Jmin: 40, Jmax: 42}
	seen := map[int]bool{}
	for r := range uint32(30) {
		n := p.JunkSize(r)
		if n < 40 || n > 42 {
			t.Fatalf("JunkSize(%d) = %d", r, n)
		}
		seen[n] = true
	}
	if len(seen) != 3 {
		t.Fatalf("sizes seen %v, want all of 40..42", seen)
	}
	if n := (&Params{Jmin: 7, Jmax: 7}).JunkSize(^uint32(0)); n != 7 {
		t.Fatalf("Jmin == Jmax: %d", n)
	}
}

func FuzzClassify(f *testing.F) {
	p := sample
	for _, typ := range []uint32{1, 2, 3, 4} {
		f.Add(wrap(&p, typ, body(typ, size(typ)), 0xaa), int(p.S1), int(p.S2), p.H[0], p.H[3])
	}
	f.Add(body(1, noise.InitiationSize), 0, 0, uint32(0), uint32(0))
	f.Add([]byte{}, 1, 2, uint32(9), uint32(10))
	f.Fuzz(func(t *testing.T, b []byte, s1, s2 int, h1, h4 uint32) {
		q := Params{S1: s1, S2: s2, H: [4]uint32{h1, 0, 0, h4}}
		if q.Validate() != nil {
			return
		}
		typ, off, ok := q.Classify(b)
		if !ok {
			return
		}
		if typ < 1 || typ > 4 || off != q.Padding(typ) || off > len(b) {
			t.Fatalf("got type %d at %d of %d bytes", typ, off, len(b))
		}
		msg := b[off:]
		if binary.LittleEndian.Uint32(msg) != q.Type(typ) {
			t.Fatalf("type word %#x is not the configured %#x", binary.LittleEndian.Uint32(msg), q.Type(typ))
		}
		if typ != noise.TypeTransport && len(msg) != size(typ) || len(msg) < noise.TransportOverhead && typ == noise.TypeTransport {
			t.Fatalf("type %d with %d bytes", typ, len(msg))
		}
		// Re-wrapping what was classified yields the same datagram.
		if w := wrap(&q, typ, msg, 0); len(w) != len(b) {
			t.Fatalf("re-wrapped to %d bytes, got %d", len(w), len(b))
		}
	})
}
