package chachapoly

import (
	"bytes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	mrand "math/rand/v2"
	"strconv"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"
)

func needFast(t testing.TB) {
	t.Helper()
	if !fastCPU {
		t.Skip("this CPU lacks AVX-512 F/VL/BW/IFMA: the AEAD is x/crypto's, tested upstream")
	}
}

func mustNew(t testing.TB, key []byte) (*AEAD, cipher.AEAD) {
	t.Helper()
	a, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	r, err := chacha20poly1305.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return a, r // x/crypto's, the reference every result is compared with
}

// The RFC 8439 section 2.8.2 example. With its additional data it takes
// the fallback; the fast path is checked against the same vector by
// sealing the plaintext, extended past fastMin, without additional data:
// the ciphertext does not depend on the additional data, so its first 114
// bytes must be the RFC's, and the whole output x/crypto's.
func TestRFC8439Vector(t *testing.T) {
	key, _ := hex.DecodeString("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f")
	nonce, _ := hex.DecodeString("070000004041424344454647")
	ad, _ := hex.DecodeString("50515253c0c1c2c3c4c5c6c7")
	pt := []byte("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.")
	want, _ := hex.DecodeString("d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc3ff4def08e4b7a9de576d26586cec64b6116" + "1ae10b594f09e26a7e902ecbd0600691")
	a, ref := mustNew(t, key)
	if got := a.Seal(nil, nonce, pt, ad); !bytes.Equal(got, want) {
		t.Fatalf("seal with ad:\n got %x\nwant %x", got, want)
	}
	if got, err := a.Open(nil, nonce, want, ad); err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("open with ad: %q, %v", got, err)
	}
	long := append(bytes.Clone(pt), make([]byte, fastMin)...)
	got := a.Seal(nil, nonce, long, nil)
	if !bytes.Equal(got[:len(pt)], want[:len(pt)]) {
		t.Fatalf("fast-path ciphertext differs from RFC 8439 2.8.2:\n got %x\nwant %x", got[:len(pt)], want[:len(pt)])
	}
	if ref := ref.Seal(nil, nonce, long, nil); !bytes.Equal(got, ref) {
		t.Fatalf("fast-path seal differs from x/crypto:\n got %x\nwant %x", got, ref)
	}
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// Every length to 2100 and random ones to 70,000, in place and not, against
// x/crypto; the bytes past the output stay untouched; every single-bit flip
// of a short message's ciphertext or tag fails to open and writes nothing.
func TestMatchesXCrypto(t *testing.T) {
	needFast(t)
	lengths := make([]int, 0, 2200)
	for n := 0; n <= 2100; n++ {
		lengths = append(lengths, n)
	}
	for range 100 {
		lengths = append(lengths, mrand.IntN(70000))
	}
	for _, n := range lengths {
		key, nonce, pt := randBytes(KeySize), randBytes(NonceSize), randBytes(n)
		a, ref := mustNew(t, key)
		want := ref.Seal(nil, nonce, pt, nil)

		// Out of place, with a prefix in dst and a canary past the end.
		buf := bytes.Repeat([]byte{0xa5}, 3+n+Overhead+7)
		got := a.Seal(buf[:3], nonce, pt, nil)
		if !bytes.Equal(got[3:], want) || !bytes.Equal(buf[:3], []byte{0xa5, 0xa5, 0xa5}) {
			t.Fatalf("len %d: seal differs from x/crypto", n)
		}
		if !bytes.Equal(buf[3+n+Overhead:], bytes.Repeat([]byte{0xa5}, 7)) {
			t.Fatalf("len %d: seal wrote past its output", n)
		}
		// In place.
		io := make([]byte, n+Overhead+5)
		copy(io, pt)
		if got := a.Seal(io[:0], nonce, io[:n], nil); !bytes.Equal(got, want) {
			t.Fatalf("len %d: in-place seal differs", n)
		}
		pt2, err := a.Open(io[:0], nonce, io[:n+Overhead], nil)
		if err != nil || !bytes.Equal(pt2, pt) {
			t.Fatalf("len %d: in-place open: %v", n, err)
		}
		if pt3, err := a.Open(nil, nonce, want, nil); err != nil || !bytes.Equal(pt3, pt) {
			t.Fatalf("len %d: open: %v", n, err)
		}
	}
}

func TestOpenRejectsEveryBitFlip(t *testing.T) {
	needFast(t)
	for _, n := range []int{0, 1, 63, 511, 512, 513, 959, 960, 961, 1024, 1025, 1440, 4000} {
		key, nonce, pt := randBytes(KeySize), randBytes(NonceSize), randBytes(n)
		a, _ := mustNew(t, key)
		ct := a.Seal(nil, nonce, pt, nil)
		for bit := 0; bit < 8*len(ct); bit += max(1, len(ct)/64) {
			bad := bytes.Clone(ct)
			bad[bit/8] ^= 1 << (bit % 8)
			out := bytes.Repeat([]byte{0x5a}, len(ct))
			if _, err := a.Open(out[:0], nonce, bad, nil); err == nil {
				t.Fatalf("len %d: flipped bit %d opened", n, bit)
			}
			if n < fastMin {
				continue // x/crypto's Open zeroes dst when it fails
			}
			if !bytes.Equal(out, bytes.Repeat([]byte{0x5a}, len(ct))) {
				t.Fatalf("len %d: a failed open wrote to dst", n)
			}
			// In place: the ciphertext must survive a failed open.
			inplace := bytes.Clone(bad)
			if _, err := a.Open(inplace[:0], nonce, inplace, nil); err == nil || !bytes.Equal(inplace, bad) {
				t.Fatalf("len %d: failed in-place open changed the buffer (%v)", n, err)
			}
		}
		wrongNonce := bytes.Clone(nonce)
		wrongNonce[11] ^= 1
		if _, err := a.Open(nil, wrongNonce, ct, nil); err == nil {
			t.Fatalf("len %d: opened under the wrong nonce", n)
		}
	}
}

func TestShortAndOddInputsFallBack(t *testing.T) {
	a, ref := mustNew(t, randBytes(KeySize))
	nonce := randBytes(NonceSize)
	for _, ct := range [][]byte{nil, make([]byte, Overhead-1)} {
		if _, err := a.Open(nil, nonce, ct, nil); err == nil {
			t.Fatalf("opened a %d-byte message", len(ct))
		}
	}
	pt, ad := randBytes(100), randBytes(13)
	if got, want := a.Seal(nil, nonce, pt, ad), ref.Seal(nil, nonce, pt, ad); !bytes.Equal(got, want) {
		t.Fatal("seal with additional data differs")
	}
	if _, err := New(make([]byte, 31)); err == nil {
		t.Fatal("New took a 31-byte key")
	}
}

func TestOverlapPanics(t *testing.T) {
	needFast(t)
	a, _ := mustNew(t, randBytes(KeySize))
	buf := make([]byte, 200)
	defer func() {
		if recover() == nil {
			t.Fatal("a shifted overlap did not panic")
		}
	}()
	a.Seal(buf[:1], randBytes(NonceSize), buf[:100], nil)
}

func TestAllocs(t *testing.T) {
	needFast(t)
	a, _ := mustNew(t, randBytes(KeySize))
	nonce, buf := randBytes(NonceSize), make([]byte, 1440+Overhead)
	if n := testing.AllocsPerRun(100, func() {
		ct := a.Seal(buf[:0], nonce, buf[:1440], nil)
		if _, err := a.Open(ct[:0], nonce, ct, nil); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per seal and open", n)
	}
}

func FuzzAEAD(f *testing.F) {
	f.Add(make([]byte, 32), make([]byte, 12), []byte("hello"), uint16(0))
	f.Add(bytes.Repeat([]byte{0xff}, 32), bytes.Repeat([]byte{0xff}, 12), bytes.Repeat([]byte{0xff}, 1440), uint16(7))
	f.Fuzz(func(t *testing.T, key, nonce, pt []byte, flip uint16) {
		if len(key) != KeySize || len(nonce) != NonceSize {
			return
		}
		a, ref := mustNew(t, key)
		want := ref.Seal(nil, nonce, pt, nil)
		got := a.Seal(nil, nonce, pt, nil)
		if !bytes.Equal(got, want) {
			t.Fatalf("seal differs")
		}
		bad := bytes.Clone(got)
		bad[int(flip)%len(bad)] ^= 1 << (flip % 8)
		_, errRef := ref.Open(nil, nonce, bad, nil)
		_, err := a.Open(nil, nonce, bad, nil)
		if (err == nil) != (errRef == nil) {
			t.Fatalf("open of a tampered message: %v, x/crypto %v", err, errRef)
		}
	})
}

func benchAEAD(b *testing.B, seal func(dst, nonce, pt, ad []byte) []byte, open func(dst, nonce, ct, ad []byte) ([]byte, error)) {
	for _, n := range []int{64, 128, 256, 512, 1024, 1440, 8192} {
		nonce, buf := make([]byte, NonceSize), make([]byte, n+Overhead)
		b.Run("seal/"+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				seal(buf[:0], nonce, buf[:n], nil)
			}
		})
		ct := seal(nil, nonce, buf[:n], nil)
		out := make([]byte, n)
		b.Run("open/"+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := open(out[:0], nonce, ct, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAEAD(b *testing.B) {
	needFast(b)
	a, _ := mustNew(b, make([]byte, KeySize))
	benchAEAD(b, a.Seal, a.Open)
}

func BenchmarkXCrypto(b *testing.B) {
	r, _ := chacha20poly1305.New(make([]byte, KeySize))
	benchAEAD(b, r.Seal, r.Open)
}
