package obfs

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/fips-go/fips-go/device/noise"
)

func one(v uint32) Range { return Range{v, v} }

// sample is the AmneziaWG 1.0 configuration the interop tests use.
var sample = Params{Jc: 4, Jmin: 40, Jmax: 70, S1: 52, S2: 37,
	H: [4]Range{one(1234567891), one(1234567892), one(1234567893), one(1234567894)}}

// sample2 adds AmneziaWG 2.0's cookie and transport padding and type ranges.
var sample2 = Params{Jc: 4, Jmin: 40, Jmax: 70, S1: 52, S2: 37, S3: 21, S4: 13,
	H: [4]Range{{100000, 199999}, {200000, 299999}, {300000, 399999}, {400000, 4000000000}},
	I: [5]string{"<b 0xc0ff> <r 8> <t>", "", "<rc 5>"}}

// wrap lays out a message of standard type typ as a sender does: padding
// (filled with fill), then the body with a configured type word drawn
// with r.
func wrap(p *Params, typ uint32, body []byte, fill byte, r uint32) []byte {
	pad := p.Padding(typ)
	out := make([]byte, pad, pad+len(body))
	for i := range out {
		out[i] = fill
	}
	out = append(out, body...)
	p.SetType(out[pad:], typ, r)
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
	params := []Params{{}, sample, sample2, {S1: 10}, {S3: 7, S4: 200},
		{H: [4]Range{one(5), one(6), one(7), one(8)}}, {Jc: 3, Jmax: 10}}
	for _, p := range params {
		for _, c := range cases {
			for _, r := range []uint32{0, 1, 99999, ^uint32(0)} {
				// Padding made of the type word: a classifier that looked at
				// the first bytes would be fooled.
				w := wrap(&p, c.typ, body(c.typ, c.n), byte(p.Type(c.typ, r)), r)
				typ, off, ok := p.Classify(w)
				if !ok || typ != c.typ || off != p.Padding(c.typ) {
					t.Errorf("%+v: type %d size %d r %d: got (%d, %d, %v), want (%d, %d, true)", p, c.typ, c.n, r, typ, off, ok, c.typ, p.Padding(c.typ))
				}
			}
		}
	}
}

func TestTypeInRange(t *testing.T) {
	p := sample2
	for typ := uint32(1); typ <= 4; typ++ {
		seen := map[uint32]bool{}
		for _, r := range []uint32{0, 1, 2, 12345, 1 << 31, ^uint32(0)} {
			w := p.Type(typ, r)
			if got, ok := p.StandardType(w); !ok || got != typ {
				t.Fatalf("type %d drew %d, which maps back to (%d, %v)", typ, w, got, ok)
			}
			seen[w] = true
		}
		if len(seen) < 2 {
			t.Errorf("type %d: one word for every random value", typ)
		}
	}
	full := Params{H: [4]Range{{0, ^uint32(0)}}}
	if w := full.Type(1, ^uint32(0)); w != ^uint32(0) {
		t.Errorf("full range: %d", w)
	}
}

func TestClassifyRejects(t *testing.T) {
	p := sample
	for name, b := range map[string][]byte{
		"plain initiation":     body(noise.TypeInitiation, noise.InitiationSize),
		"plain response":       body(noise.TypeResponse, noise.ResponseSize),
		"plain transport":      body(noise.TypeTransport, 100),
		"unpadded initiation":  wrap(&Params{H: p.H}, noise.TypeInitiation, body(1, noise.InitiationSize), 0, 0),
		"initiation too short": wrap(&p, noise.TypeInitiation, body(1, noise.InitiationSize-1), 0, 0),
		"short transport":      wrap(&p, noise.TypeTransport, body(4, noise.TransportOverhead-1), 0, 0),
		"cookie reply size":    wrap(&p, noise.TypeCookieReply, body(3, noise.CookieReplySize+1), 0, 0),
		"junk":                 make([]byte, 60),
		"empty":                nil,
		"three bytes":          {1, 2, 3},
	} {
		if typ, off, ok := p.Classify(b); ok {
			t.Errorf("%s: accepted as type %d at %d", name, typ, off)
		}
	}
	// A narrow transport range: with a wide one, a body's bytes at S4 may
	// well be a transport type (as in amneziawg-go).
	q := sample2
	q.H[3] = Range{400000, 499999}
	for name, b := range map[string][]byte{
		"transport without S4":   wrap(&Params{H: q.H}, noise.TypeTransport, body(4, 100), 0, 0),
		"cookie without S3":      wrap(&Params{H: q.H}, noise.TypeCookieReply, body(3, noise.CookieReplySize), 0, 0),
		"type below the range":   append(make([]byte, q.S4), body(99999, 100)...),
		"short padded transport": wrap(&q, noise.TypeTransport, body(4, noise.TransportOverhead-1), 0, 0),
	} {
		if typ, off, ok := q.Classify(b); ok {
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
// is still transport (its word at S1 is not an initiation type).
func TestClassifyTransportOfHandshakeSize(t *testing.T) {
	p := sample
	b := wrap(&p, noise.TypeTransport, body(4, noise.InitiationSize+p.S1), 0, 0)
	if typ, off, ok := p.Classify(b); !ok || typ != noise.TypeTransport || off != 0 {
		t.Fatalf("got (%d, %d, %v)", typ, off, ok)
	}
}

func TestValidate(t *testing.T) {
	good := []Params{{}, sample, sample2, {H: [4]Range{one(1), one(2), one(3), one(4)}},
		{H: [4]Range{{}, {}, {}, one(9)}}, {Jc: 128, Jmin: 1280, Jmax: 1280}, {S1: MaxS1, S2: MaxS2 - 1},
		{S3: MaxS3, S4: MaxS4}, {H: [4]Range{{0, 0}, {}, {}, {5, ^uint32(0)}}},
		{I: [5]string{"", "", "", "", "<b 0x00>"}}}
	for _, p := range good {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
	bad := []Params{
		{Jc: -1}, {Jc: 129}, {Jmin: -1}, {Jmin: 10, Jmax: 5}, {Jmax: 1281},
		{S1: -1}, {S1: MaxS1 + 1}, {S2: MaxS2 + 1}, {S1: 0, S2: 56}, {S1: 10, S2: 66},
		{S3: -1}, {S3: MaxS3 + 1}, {S4: -1}, {S4: MaxS4 + 1}, {S3: 84}, {S2: 2, S3: 30},
		{H: [4]Range{one(2)}}, {H: [4]Range{one(5), one(5)}}, {H: [4]Range{{}, {}, {}, one(3)}}, {H: [4]Range{one(7), {}, {}, one(7)}},
		{H: [4]Range{{10, 5}}}, {H: [4]Range{{10, 20}, {20, 30}}}, {H: [4]Range{{}, {}, {}, {0, 10}}},
		{I: [5]string{"<x 1>"}}, {I: [5]string{"", "junk"}}, {I: [5]string{"<d>"}},
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
	p := sample2
	for _, typ := range []uint32{1, 2, 3, 4} {
		f.Add(wrap(&p, typ, body(typ, size(typ)), 0xaa, 7), p.S1, p.S2, p.S3, p.S4, p.H[0].Lo, p.H[0].Hi, p.H[3].Lo, p.H[3].Hi)
	}
	f.Add(body(1, noise.InitiationSize), 0, 0, 0, 0, uint32(0), uint32(0), uint32(0), uint32(0))
	f.Add([]byte{}, 1, 2, 3, 4, uint32(9), uint32(9), uint32(10), uint32(20))
	f.Fuzz(func(t *testing.T, b []byte, s1, s2, s3, s4 int, h1lo, h1hi, h4lo, h4hi uint32) {
		q := Params{S1: s1, S2: s2, S3: s3, S4: s4, H: [4]Range{{h1lo, h1hi}, {}, {}, {h4lo, h4hi}}}
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
		if got, ok := q.StandardType(binary.LittleEndian.Uint32(msg)); !ok || got != typ {
			t.Fatalf("type word %#x is not in type %d's range", binary.LittleEndian.Uint32(msg), typ)
		}
		if typ != noise.TypeTransport && len(msg) != size(typ) || len(msg) < noise.TransportOverhead && typ == noise.TypeTransport {
			t.Fatalf("type %d with %d bytes", typ, len(msg))
		}
		// Re-wrapping what was classified yields a datagram of that size.
		if w := wrap(&q, typ, msg, 0, 0); len(w) != len(b) {
			t.Fatalf("re-wrapped to %d bytes, got %d", len(w), len(b))
		}
	})
}
