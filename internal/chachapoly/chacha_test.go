//go:build amd64 && !purego

package chachapoly

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"golang.org/x/crypto/chacha20"
)

func skipNoAVX512(t testing.TB) {
	t.Helper()
	if !useAVX512 {
		t.Skip("CPU lacks AVX-512 F/VL/BW; the assembly is not used here")
	}
}

// refXOR is x/crypto's chacha20: dst = src ^ keystream from counter ctr.
func refXOR(t testing.TB, key *[32]byte, nonce *[12]byte, ctr uint32, dst, src []byte) {
	t.Helper()
	c, err := chacha20.NewUnauthenticatedCipher(key[:], nonce[:])
	if err != nil {
		t.Fatal(err)
	}
	c.SetCounter(ctr)
	c.XORKeyStream(dst, src)
}

func rfcKey() *[32]byte {
	var k [32]byte
	for i := range k {
		k[i] = byte(i)
	}
	return &k
}

// RFC 8439, section 2.3.2: the block function test vector.
func TestRFC8439Block(t *testing.T) {
	skipNoAVX512(t)
	nonce := (*[12]byte)(polyHex(t, "000000090000004a00000000"))
	want := polyHex(t, `
		10 f1 e7 e4 d1 3b 59 15 50 0f dd 1f a3 20 71 c4
		c7 d1 f4 c7 33 c0 68 03 04 22 aa 9a c3 d4 6c 4e
		d2 82 64 46 07 9f aa 09 14 c2 d7 05 d9 8b 02 a2
		b5 12 9c d1 de 16 4e b9 cb d0 83 e8 a2 50 3c 4e`)
	s := newChachaState(rfcKey(), nonce, 1)
	wantState := chachaState{
		0x61707865, 0x3320646e, 0x79622d32, 0x6b206574,
		0x03020100, 0x07060504, 0x0b0a0908, 0x0f0e0d0c,
		0x13121110, 0x17161514, 0x1b1a1918, 0x1f1e1d1c,
		0x00000001, 0x09000000, 0x4a000000, 0x00000000,
	}
	if s != wantState {
		t.Fatalf("newChachaState = %08x, want %08x", s, wantState)
	}

	var ks [1024]byte
	keyStream16(&ks, &s)
	if !bytes.Equal(ks[:64], want) {
		t.Errorf("keyStream16 block 0 = %x, want %x", ks[:64], want)
	}
	got := make([]byte, 64)
	xorKeyStream(got, make([]byte, 64), &s)
	if !bytes.Equal(got, want) {
		t.Errorf("xorKeyStream(zeros) = %x, want %x", got, want)
	}
	if s != wantState {
		t.Errorf("state modified: %08x", s)
	}
}

// RFC 8439, section 2.4.2: encryption of the sunscreen plaintext.
func TestRFC8439Encrypt(t *testing.T) {
	skipNoAVX512(t)
	nonce := (*[12]byte)(polyHex(t, "000000000000004a00000000"))
	plaintext := []byte("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.")
	want := polyHex(t, `
		6e 2e 35 9a 25 68 f9 80 41 ba 07 28 dd 0d 69 81
		e9 7e 7a ec 1d 43 60 c2 0a 27 af cc fd 9f ae 0b
		f9 1b 65 c5 52 47 33 ab 8f 59 3d ab cd 62 b3 57
		16 39 d6 24 e6 51 52 ab 8f 53 0c 35 9f 08 61 d8
		07 ca 0d bf 50 0d 6a 61 56 a3 8e 08 8a 22 b6 5e
		52 bc 51 4d 16 cc f8 06 81 8c e9 1a b7 79 37 36
		5a f9 0b bf 74 a3 5b e6 b4 0b 8e ed f2 78 5e 42
		87 4d`)
	s := newChachaState(rfcKey(), nonce, 1)

	got := make([]byte, len(plaintext))
	xorKeyStream(got, plaintext, &s)
	if !bytes.Equal(got, want) {
		t.Errorf("ciphertext = %x, want %x", got, want)
	}
	xorKeyStream(got, got, &s) // in place, decrypts
	if !bytes.Equal(got, plaintext) {
		t.Errorf("decrypted = %q", got)
	}
	xorKeyStreamGeneric(got, plaintext, &s)
	if !bytes.Equal(got, want) {
		t.Errorf("generic ciphertext = %x, want %x", got, want)
	}
}

type params struct {
	key   [32]byte
	nonce [12]byte
	ctr   uint32
}

// randParams returns a random key and nonce and a counter from which n
// bytes of keystream do not pass 2^32 blocks; one time in four the counter
// is as close to the limit as allowed, to exercise lanes near the wrap.
func randParams(r *rand.Rand, n int) params {
	var p params
	for i := range p.key {
		p.key[i] = byte(r.Uint32())
	}
	for i := range p.nonce {
		p.nonce[i] = byte(r.Uint32())
	}
	blocks := uint64(n+63) / 64
	switch r.IntN(4) {
	case 0:
		p.ctr = uint32(1<<32 - blocks)
	case 1:
		p.ctr = uint32(r.IntN(20))
	default:
		p.ctr = uint32(r.Uint64N(1<<32 - blocks + 1))
	}
	return p
}

const canary = 0xa5

// checkXOR compares xorKeyStream with x/crypto for n bytes, out of place
// and in place, at the given buffer offsets, and checks that no byte of
// dst outside [0, n) changes.
func checkXOR(t *testing.T, r *rand.Rand, xor func(dst, src []byte, s *chachaState), n, srcOff, dstOff int) {
	t.Helper()
	p := randParams(r, n)
	s := newChachaState(&p.key, &p.nonce, p.ctr)
	s0 := s

	srcBuf := make([]byte, srcOff+n+64)
	for i := range srcBuf {
		srcBuf[i] = byte(r.Uint32())
	}
	src := srcBuf[srcOff : srcOff+n]
	srcCopy := bytes.Clone(srcBuf)

	want := make([]byte, n)
	refXOR(t, &p.key, &p.nonce, p.ctr, want, src)

	// Out of place, dst longer than src, canaries around.
	dstBuf := bytes.Repeat([]byte{canary}, dstOff+n+128)
	dst := dstBuf[dstOff : dstOff+n+64]
	xor(dst, src, &s)
	if !bytes.Equal(dst[:n], want) {
		t.Fatalf("n=%d ctr=%#x: out of place mismatch at %d", n, p.ctr, firstDiff(dst[:n], want))
	}
	for i, b := range dstBuf {
		if (i < dstOff || i >= dstOff+n) && b != canary {
			t.Fatalf("n=%d: dst buffer byte %d (dst[%d]) overwritten: %#x", n, i, i-dstOff, b)
		}
	}
	if !bytes.Equal(srcBuf, srcCopy) {
		t.Fatalf("n=%d: src modified", n)
	}
	if s != s0 {
		t.Fatalf("n=%d: state modified", n)
	}

	// In place.
	xor(src, src, &s)
	if !bytes.Equal(src, want) {
		t.Fatalf("n=%d ctr=%#x: in place mismatch at %d", n, p.ctr, firstDiff(src, want))
	}
	if !bytes.Equal(srcBuf[srcOff+n:], srcCopy[srcOff+n:]) || !bytes.Equal(srcBuf[:srcOff], srcCopy[:srcOff]) {
		t.Fatalf("n=%d: in place wrote outside [0, n)", n)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestXORKeyStreamAllLengths(t *testing.T) {
	skipNoAVX512(t)
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n <= 2100; n++ {
		checkXOR(t, r, xorKeyStream, n, r.IntN(64), r.IntN(64))
	}
}

func TestXORKeyStreamRandomLengths(t *testing.T) {
	skipNoAVX512(t)
	r := rand.New(rand.NewPCG(3, 4))
	iters := 300
	if testing.Short() {
		iters = 50
	}
	for range iters {
		checkXOR(t, r, xorKeyStream, r.IntN(70001), r.IntN(64), r.IntN(64))
	}
	// Group and tail boundaries, and lengths ending exactly at 2^32 blocks.
	for _, base := range []int{1024, 1536, 2048, 2560, 4096, 16384, 65536} {
		for _, d := range []int{-257, -256, -255, -65, -64, -63, -1, 0, 1, 63, 64, 65, 255, 256, 257, 511, 512, 513} {
			checkXOR(t, r, xorKeyStream, base+d, 0, 0)
		}
	}
}

// The portable fallback is not what this CPU runs; test it explicitly.
func TestXORKeyStreamGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 63, 64, 65, 127, 128, 1000, 1440, 4097} {
		checkXOR(t, r, xorKeyStreamGeneric, n, r.IntN(64), r.IntN(64))
	}
}

func TestKeyStream16(t *testing.T) {
	skipNoAVX512(t)
	r := rand.New(rand.NewPCG(7, 8))
	for i := range 200 {
		p := randParams(r, 1024)
		if i == 0 {
			p.ctr = 0
		}
		s := newChachaState(&p.key, &p.nonce, p.ctr)
		s0 := s
		var ks [1024]byte
		keyStream16(&ks, &s)
		want := make([]byte, 1024)
		refXOR(t, &p.key, &p.nonce, p.ctr, want, make([]byte, 1024))
		if !bytes.Equal(ks[:], want) {
			t.Fatalf("ctr=%#x: mismatch at %d", p.ctr, firstDiff(ks[:], want))
		}
		if s != s0 {
			t.Fatal("state modified")
		}
		// The generic path agrees too.
		var gks [1024]byte
		for j := range 16 {
			blockGeneric((*[64]byte)(gks[64*j:]), &s, s[12]+uint32(j))
		}
		if gks != ks {
			t.Fatalf("ctr=%#x: generic keystream differs", p.ctr)
		}
	}
}

// keyStream24 runs the 16-lane and 8-lane states in one interleaved pass;
// check every block against x/crypto and the generic code, including
// counters up to 2^32 - 24 (the last that does not wrap).
func TestKeyStream24(t *testing.T) {
	skipNoAVX512(t)
	r := rand.New(rand.NewPCG(9, 10))
	for i := range 200 {
		p := randParams(r, 1536)
		switch i {
		case 0:
			p.ctr = 0
		case 1:
			p.ctr = 1<<32 - 24
		case 2:
			p.ctr = 1<<32 - 25
		}
		s := newChachaState(&p.key, &p.nonce, p.ctr)
		s0 := s
		var ks [1536]byte
		for j := range ks {
			ks[j] = canary
		}
		keyStream24(&ks, &s)
		want := make([]byte, 1536)
		refXOR(t, &p.key, &p.nonce, p.ctr, want, make([]byte, 1536))
		if !bytes.Equal(ks[:], want) {
			d := firstDiff(ks[:], want)
			t.Fatalf("ctr=%#x: mismatch at %d (block %d)", p.ctr, d, d/64)
		}
		if s != s0 {
			t.Fatal("state modified")
		}
		var gks [1536]byte
		keyStream24Generic(&gks, &s)
		if gks != ks {
			t.Fatalf("ctr=%#x: generic keystream differs", p.ctr)
		}
		// The first 16 blocks are keyStream16's.
		var ks16 [1024]byte
		keyStream16(&ks16, &s)
		if !bytes.Equal(ks16[:], ks[:1024]) {
			t.Fatalf("ctr=%#x: keyStream16 differs", p.ctr)
		}
	}
}

func FuzzXORKeyStream(f *testing.F) {
	f.Add(make([]byte, 32), make([]byte, 12), uint32(0), []byte{})
	f.Add(rfcKey()[:], []byte("\x00\x00\x00\x00\x00\x00\x00\x4a\x00\x00\x00\x00"), uint32(1), []byte("Ladies and Gentlemen"))
	f.Add(make([]byte, 32), make([]byte, 12), uint32(0xfffffff0), make([]byte, 1023))
	f.Add(make([]byte, 32), make([]byte, 12), uint32(7), make([]byte, 1440))
	f.Add(make([]byte, 32), make([]byte, 12), uint32(0xffffffe8), make([]byte, 1536))
	f.Fuzz(func(t *testing.T, keyb, nonceb []byte, ctr uint32, data []byte) {
		skipNoAVX512(t)
		var key [32]byte
		var nonce [12]byte
		copy(key[:], keyb)
		copy(nonce[:], nonceb)
		if blocks := uint64(len(data)+63) / 64; uint64(ctr)+blocks > 1<<32 {
			ctr = uint32(1<<32 - blocks)
		}
		want := make([]byte, len(data))
		refXOR(t, &key, &nonce, ctr, want, data)
		s := newChachaState(&key, &nonce, ctr)
		got := make([]byte, len(data)+1)
		got[len(data)] = canary
		xorKeyStream(got, data, &s)
		if !bytes.Equal(got[:len(data)], want) || got[len(data)] != canary {
			t.Fatalf("len=%d ctr=%#x: mismatch", len(data), ctr)
		}
		xorKeyStream(data, data, &s)
		if !bytes.Equal(data, want) {
			t.Fatalf("len=%d ctr=%#x: in-place mismatch", len(data), ctr)
		}
	})
}

var benchSizes = []int{64, 1440, 8192}

func BenchmarkXORKeyStream(b *testing.B) {
	skipNoAVX512(b)
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := newChachaState(rfcKey(), new([12]byte), 1)
			buf := make([]byte, n)
			b.SetBytes(int64(n))
			for b.Loop() {
				xorKeyStream(buf, buf, &s)
			}
		})
	}
}

func BenchmarkXCryptoXORKeyStream(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			key, nonce := rfcKey(), new([12]byte)
			buf := make([]byte, n)
			b.SetBytes(int64(n))
			for b.Loop() {
				c, _ := chacha20.NewUnauthenticatedCipher(key[:], nonce[:])
				c.SetCounter(1)
				c.XORKeyStream(buf, buf)
			}
		})
	}
}

func BenchmarkKeyStream16(b *testing.B) {
	skipNoAVX512(b)
	s := newChachaState(rfcKey(), new([12]byte), 0)
	var ks [1024]byte
	b.SetBytes(1024)
	for b.Loop() {
		keyStream16(&ks, &s)
	}
}

// BenchmarkKeyStream24 compares the interleaved 24-block pass with what it
// replaces: keyStream16 and then an 8-lane pass (xorKeyStream of 512 bytes).
func BenchmarkKeyStream24(b *testing.B) {
	skipNoAVX512(b)
	s := newChachaState(rfcKey(), new([12]byte), 0)
	b.Run("interleaved", func(b *testing.B) {
		var ks [1536]byte
		b.SetBytes(1536)
		for b.Loop() {
			keyStream24(&ks, &s)
		}
	})
	b.Run("16+8", func(b *testing.B) {
		var ks [1536]byte
		zeros := make([]byte, 512)
		s16 := s
		s16[12] += 16
		b.SetBytes(1536)
		for b.Loop() {
			keyStream16((*[1024]byte)(ks[:1024]), &s)
			xorKeyStream(ks[1024:], zeros, &s16)
		}
	})
	b.Run("8", func(b *testing.B) {
		var ks [512]byte
		zeros := make([]byte, 512)
		b.SetBytes(512)
		for b.Loop() {
			xorKeyStream(ks[:], zeros, &s)
		}
	})
}
