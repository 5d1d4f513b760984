package obfs

import (
	"bytes"
	"errors"
	"testing"

	"github.com/fips-go/fips-go/device/noise"
)

// sample3 is sample2 with header protection: every S at least 12.
var sample3 = func() Params {
	p := sample2
	p.S3, p.S4 = 21, 16
	for i := range p.HeaderKey {
		p.HeaderKey[i] = byte(i + 1)
	}
	return p
}()

// A masked message of every type is classified as that type, its type
// word and header no longer readable on the wire, and masking again gives
// back the message.
func TestHeaderProtectionRoundTrip(t *testing.T) {
	p := sample3
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		typ uint32
		n   int
	}{{noise.TypeInitiation, noise.InitiationSize}, {noise.TypeResponse, noise.ResponseSize},
		{noise.TypeCookieReply, noise.CookieReplySize}, {noise.TypeTransport, 200}} {
		for fill := byte(0); fill < 40; fill++ { // different nonces
			plain := wrap(&p, c.typ, body(c.typ, c.n), fill, uint32(fill)*7919)
			b := bytes.Clone(plain)
			p.Mask(b, c.typ)
			pad := p.Padding(c.typ)
			if bytes.Equal(b[pad:pad+noise.TransportHeaderSize], plain[pad:pad+noise.TransportHeaderSize]) {
				t.Fatalf("type %d: the header is unchanged by masking", c.typ)
			}
			if c.typ == noise.TypeTransport && !bytes.Equal(b[pad+16:], plain[pad+16:]) {
				t.Fatalf("transport: bytes past the header were masked")
			}
			typ, off, ok := p.Classify(b)
			if !ok || typ != c.typ || off != pad {
				t.Fatalf("type %d (fill %d): classified %d at %d, %v", c.typ, fill, typ, off, ok)
			}
			p.Mask(b, typ)
			if !bytes.Equal(b, plain) {
				t.Fatalf("type %d: unmasking did not restore the message", c.typ)
			}
		}
	}
}

// Without the key (or with another) a masked message is not classified as
// what it is, and an unmasked one is not accepted by a protected receiver.
func TestHeaderProtectionNeedsTheKey(t *testing.T) {
	p, other := sample3, sample3
	other.HeaderKey[0] ^= 1
	misread := 0
	for fill := byte(0); fill < 50; fill++ {
		b := wrap(&p, noise.TypeInitiation, body(1, noise.InitiationSize), fill, 1)
		// (Anything may pass for transport under sample2's wide h4 range:
		// it is then dropped for its unknown receiver index.)
		if typ, _, ok := p.Classify(b); ok && typ == noise.TypeInitiation {
			misread++ // an unmasked message, read by a protected receiver
		}
		p.Mask(b, noise.TypeInitiation)
		if typ, _, ok := other.Classify(b); ok && typ == noise.TypeInitiation {
			misread++
		}
	}
	// A wrong mask puts the word in the 100000-wide range by chance once
	// in about 43,000.
	if misread > 1 {
		t.Fatalf("%d of 100 messages classified without the right key", misread)
	}
}

func TestHeaderProtectionNeedsNoncePadding(t *testing.T) {
	p := sample3
	p.S4 = NonceSize - 1
	if err := p.Validate(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("s4 %d with header protection: %v, want ErrInvalid", p.S4, err)
	}
	if _, _, ok := sample3.Classify(make([]byte, NonceSize-1)); ok {
		t.Fatal("a datagram shorter than the nonce was classified")
	}
}

// FuzzClassifyProtected: under header protection, whatever Classify
// accepts unmasks to a type word of that type and never panics.
func FuzzClassifyProtected(f *testing.F) {
	p := sample3
	for _, typ := range []uint32{1, 2, 3, 4} {
		b := wrap(&p, typ, body(typ, size(typ)), 0xaa, 7)
		p.Mask(b, typ)
		f.Add(b, byte(1))
	}
	f.Add([]byte{1, 2, 3}, byte(9))
	f.Fuzz(func(t *testing.T, b []byte, key byte) {
		q := sample3
		q.HeaderKey[0] = key
		typ, off, ok := q.Classify(b)
		if !ok {
			return
		}
		b = bytes.Clone(b)
		q.Mask(b, typ)
		if got, ok := q.StandardType(le32(b[off:])); !ok || got != typ || off != q.Padding(typ) {
			t.Fatalf("classified %d at %d, unmasked type word %#x", typ, off, le32(b[off:]))
		}
	})
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// Unwrap classifies and unmasks as Classify and Mask do together.
func TestUnwrapIsClassifyAndMask(t *testing.T) {
	for _, p := range []Params{sample2, sample3} {
		for _, typ := range []uint32{1, 2, 3, 4} {
			for fill := byte(0); fill < 20; fill++ {
				b := wrap(&p, typ, body(typ, max(size(typ), 100)), fill, uint32(fill))
				if typ != noise.TypeTransport {
					b = wrap(&p, typ, body(typ, size(typ)), fill, uint32(fill))
				}
				p.Mask(b, typ)
				want := bytes.Clone(b)
				wt, wo, wok := p.Classify(want)
				if wok {
					p.Mask(want, wt)
				}
				gt, goff, gok := p.Unwrap(b)
				if gt != wt || goff != wo || gok != wok || !bytes.Equal(b, want) {
					t.Fatalf("type %d: Unwrap %d %d %v, Classify+Mask %d %d %v", typ, gt, goff, gok, wt, wo, wok)
				}
			}
		}
	}
}
