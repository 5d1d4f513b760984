package chachapoly

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	//lint:ignore SA1019 the reference implementation every tag is compared with
	"golang.org/x/crypto/poly1305"
)

// polyPaths are the implementations every test compares: the portable scalar
// Go code, and the IFMA kernel forced on for every message of >= 128 bytes
// (regardless of the polyVecMin threshold), plus the public entry points.
var polyPaths = []struct {
	name   string
	vector bool
}{
	{"scalar", false},
	{"vector", true},
}

func polySkipPath(t testing.TB, vector bool) bool {
	t.Helper()
	if vector && !useIFMA {
		t.Logf("skipping the vector path: no AVX-512 F/VL/IFMA on this CPU/GOARCH (the scalar path is still tested)")
		return true
	}
	return false
}

func polyHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// polyPadded builds ct || pad16 || le64(0) || le64(len(ct)), the message the
// AEAD MACs, explicitly (the reference for polyAEAD).
func polyPadded(ct []byte) []byte {
	n := (len(ct) + 15) &^ 15
	m := make([]byte, n+16)
	copy(m, ct)
	binary.LittleEndian.PutUint64(m[n+8:], uint64(len(ct)))
	return m
}

// polyCheck compares polySum, polyAEAD and both forced paths with x/crypto
// for one key and message.
func polyCheck(t *testing.T, key *[32]byte, msg []byte) {
	t.Helper()
	var want, wantAEAD, got [16]byte
	poly1305.Sum(&want, msg, key)
	poly1305.Sum(&wantAEAD, polyPadded(msg), key)

	polySum(&got, msg, key)
	if got != want {
		t.Fatalf("polySum len %d key %x msg %.64x...: got %x want %x", len(msg), key, msg, got, want)
	}
	polyAEAD(&got, msg, key)
	if got != wantAEAD {
		t.Fatalf("polyAEAD len %d key %x msg %.64x...: got %x want %x", len(msg), key, msg, got, wantAEAD)
	}
	for _, p := range polyPaths {
		if p.vector && !useIFMA {
			continue
		}
		polyTag(&got, msg, key, false, p.vector)
		if got != want {
			t.Fatalf("%s sum len %d key %x msg %.64x...: got %x want %x", p.name, len(msg), key, msg, got, want)
		}
		polyTag(&got, msg, key, true, p.vector)
		if got != wantAEAD {
			t.Fatalf("%s aead len %d key %x msg %.64x...: got %x want %x", p.name, len(msg), key, msg, got, wantAEAD)
		}
	}
}

func polyRand(t testing.TB) *rand.Rand {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 0x706f6c79))
}

func polyFill(r *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

// RFC 8439 section 2.5.2.
func TestPolyRFC8439Section252(t *testing.T) {
	key := (*[32]byte)(polyHex(t, "85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b"))
	msg := []byte("Cryptographic Forum Research Group")
	want := polyHex(t, "a8061dc1305136c6c22b8baf0c0127a9")
	var got [16]byte
	polySum(&got, msg, key)
	if !bytes.Equal(got[:], want) {
		t.Fatalf("got %x want %x", got, want)
	}
	for _, p := range polyPaths {
		if polySkipPath(t, p.vector) {
			continue
		}
		polyTag(&got, msg, key, false, p.vector)
		if !bytes.Equal(got[:], want) {
			t.Fatalf("%s: got %x want %x", p.name, got, want)
		}
	}
	// The same message repeated so that the vector kernel takes part.
	polyCheck(t, key, bytes.Repeat(msg, 40))
}

const polyIETFText = `Any submission to the IETF intended by the Contributor for publication as all or part of an IETF Internet-Draft or RFC and any statement made within the context of an IETF activity is considered an "IETF Contribution". Such statements include oral statements in IETF sessions, as well as written and electronic communications made at any time or place, which are addressed to`

// RFC 8439 appendix A.3, Poly1305 test vectors #1-#11 (#5-#11 exercise the
// modular reduction: all-0xff blocks, h close to p, carries between limbs).
var polyA3 = []struct {
	key, msg, tag string
}{
	{ // #1
		"0000000000000000000000000000000000000000000000000000000000000000",
		strings.Repeat("00", 64),
		"00000000000000000000000000000000",
	},
	{ // #2
		"0000000000000000000000000000000036e5f6b5c5e06070f0efca96227a863e",
		hex.EncodeToString([]byte(polyIETFText)),
		"36e5f6b5c5e06070f0efca96227a863e",
	},
	{ // #3
		"36e5f6b5c5e06070f0efca96227a863e00000000000000000000000000000000",
		hex.EncodeToString([]byte(polyIETFText)),
		"f3477e7cd95417af89a6b8794c310cf0",
	},
	{ // #4
		"1c9240a5eb55d38af333888604f6b5f0473917c1402b80099dca5cbc207075c0",
		hex.EncodeToString([]byte("'Twas brillig, and the slithy toves\nDid gyre and gimble in the wabe:\nAll mimsy were the borogoves,\nAnd the mome raths outgrabe.")),
		"4541669a7eaaee61e708dc7cbcc5eb62",
	},
	{ // #5: partially reduced final result that is not fully reduced
		"0200000000000000000000000000000000000000000000000000000000000000",
		"ffffffffffffffffffffffffffffffff",
		"03000000000000000000000000000000",
	},
	{ // #6: addition of s overflows 2^128
		"02000000000000000000000000000000ffffffffffffffffffffffffffffffff",
		"02000000000000000000000000000000",
		"03000000000000000000000000000000",
	},
	{ // #7: all-ones data limb with a carry from the lower limb
		"0100000000000000000000000000000000000000000000000000000000000000",
		"ffffffffffffffffffffffffffffffff" + "f0ffffffffffffffffffffffffffffff" + "11000000000000000000000000000000",
		"05000000000000000000000000000000",
	},
	{ // #8: polynomial part is exactly 2^130-5
		"0100000000000000000000000000000000000000000000000000000000000000",
		"ffffffffffffffffffffffffffffffff" + "fbfefefefefefefefefefefefefefefe" + "01010101010101010101010101010101",
		"00000000000000000000000000000000",
	},
	{ // #9: polynomial part is exactly 2^130-6
		"0200000000000000000000000000000000000000000000000000000000000000",
		"fdffffffffffffffffffffffffffffff",
		"faffffffffffffffffffffffffffffff",
	},
	{ // #10: 5*H+L type reduction produces a 131-bit intermediate result
		"0100000000000000040000000000000000000000000000000000000000000000",
		"e33594d7505e43b90000000000000000" + "3394d7505e4379cd0100000000000000" + "00000000000000000000000000000000" + "01000000000000000000000000000000",
		"14000000000000005500000000000000",
	},
	{ // #11: as #10, with a final result below 2^130-5
		"0100000000000000040000000000000000000000000000000000000000000000",
		"e33594d7505e43b90000000000000000" + "3394d7505e4379cd0100000000000000" + "00000000000000000000000000000000",
		"13000000000000000000000000000000",
	},
}

func TestPolyRFC8439VectorsA3(t *testing.T) {
	if len(polyIETFText) != 375 {
		t.Fatalf("IETF text is %d bytes, want 375", len(polyIETFText))
	}
	for i, v := range polyA3 {
		key := (*[32]byte)(polyHex(t, v.key))
		msg := polyHex(t, v.msg)
		want := polyHex(t, v.tag)
		var got [16]byte
		poly1305.Sum(&got, msg, key)
		if !bytes.Equal(got[:], want) {
			t.Fatalf("#%d: x/crypto disagrees with the vector: got %x want %x", i+1, got, want)
		}
		polySum(&got, msg, key)
		if !bytes.Equal(got[:], want) {
			t.Errorf("#%d: polySum got %x want %x", i+1, got, want)
		}
		for _, p := range polyPaths {
			if polySkipPath(t, p.vector) {
				continue
			}
			polyTag(&got, msg, key, false, p.vector)
			if !bytes.Equal(got[:], want) {
				t.Errorf("#%d %s: got %x want %x", i+1, p.name, got, want)
			}
		}
		// Blow each vector up past the vector threshold: the tags are not
		// known answers any more, but the reduction edge cases now also run
		// through the IFMA lanes (and the lane combination).
		for _, reps := range []int{8, 9, 17, 64} {
			polyCheck(t, key, bytes.Repeat(msg, reps))
		}
	}
}

func TestPolyAllLengths(t *testing.T) {
	r := polyRand(t)
	buf := make([]byte, 2100)
	var key [32]byte
	for n := 0; n <= len(buf); n++ {
		polyFill(r, key[:])
		polyFill(r, buf[:n])
		polyCheck(t, &key, buf[:n])
	}
}

func TestPolyRandomLengths(t *testing.T) {
	r := polyRand(t)
	iters := 600
	if testing.Short() {
		iters = 100
	}
	buf := make([]byte, 70000)
	var key [32]byte
	for i := 0; i < iters; i++ {
		n := r.IntN(len(buf) + 1)
		off := r.IntN(16) // unaligned starts
		if n+off > len(buf) {
			n = len(buf) - off
		}
		polyFill(r, key[:])
		polyFill(r, buf[off:off+n])
		polyCheck(t, &key, buf[off:off+n])
	}
}

// polyAdversarialKeys: r with every clamp-allowed bit set, s all ones, r = 0,
// r = 1, and mixtures.
func polyAdversarialKeys() [][32]byte {
	var keys [][32]byte
	for _, rb := range []byte{0xff, 0x00} {
		for _, sb := range []byte{0xff, 0x00} {
			var k [32]byte
			for i := 0; i < 16; i++ {
				k[i] = rb
				k[16+i] = sb
			}
			keys = append(keys, k)
		}
	}
	var one, two [32]byte
	one[0], two[0] = 1, 2
	for i := 16; i < 32; i++ {
		two[i] = 0xff
	}
	keys = append(keys, one, two)
	// Clamped-maximum r with low bits cleared (r limbs at their extremes).
	var k [32]byte
	for i := range k {
		k[i] = 0xff
	}
	k[0] = 0xfc
	keys = append(keys, k)
	return keys
}

func TestPolyAdversarial(t *testing.T) {
	lengths := []int{0, 1, 15, 16, 17, 31, 32, 127, 128, 129, 143, 144, 255, 256, 257, 383, 384,
		511, 512, 1023, 1024, 1440, 1455, 1456, 2047, 4096, 8191, 8192, 65535, 65536, 70000}
	type gen struct {
		name string
		fill func(b []byte)
	}
	gens := []gen{
		{"ff", func(b []byte) {
			for i := range b {
				b[i] = 0xff
			}
		}},
		{"00", func(b []byte) { clear(b) }},
		// The low bytes of 2^130-6 and 2^130-5 in every block.
		{"fa", func(b []byte) {
			for i := range b {
				b[i] = 0xff
				if i%16 == 0 {
					b[i] = 0xfa
				}
			}
		}},
		{"fb", func(b []byte) {
			for i := range b {
				b[i] = 0xff
				if i%16 == 0 {
					b[i] = 0xfb
				}
			}
		}},
		// Alternating all-ones and zero blocks.
		{"ff00", func(b []byte) {
			for i := range b {
				if (i/16)%2 == 0 {
					b[i] = 0xff
				} else {
					b[i] = 0
				}
			}
		}},
	}
	buf := make([]byte, 70000)
	for _, key := range polyAdversarialKeys() {
		for _, g := range gens {
			for _, n := range lengths {
				g.fill(buf[:n])
				polyCheck(t, &key, buf[:n])
			}
		}
	}
	// All-ones messages with random keys, every length around the
	// vector/scalar seams.
	r := polyRand(t)
	gens[0].fill(buf[:2100])
	var key [32]byte
	for n := 0; n <= 2100; n++ {
		polyFill(r, key[:])
		polyCheck(t, &key, buf[:n])
	}
}

// polyBig is an independent reference: Poly1305 with math/big.
func polyBig(msg []byte, key *[32]byte) [16]byte {
	p := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 130), big.NewInt(5))
	le := func(b []byte) *big.Int {
		rev := make([]byte, len(b))
		for i := range b {
			rev[len(b)-1-i] = b[i]
		}
		return new(big.Int).SetBytes(rev)
	}
	rb := make([]byte, 16)
	copy(rb, key[:16])
	for _, i := range []int{3, 7, 11, 15} {
		rb[i] &= 15
	}
	for _, i := range []int{4, 8, 12} {
		rb[i] &= 252
	}
	r := le(rb)
	h := new(big.Int)
	for len(msg) > 0 {
		n := min(16, len(msg))
		blk := append(append([]byte{}, msg[:n]...), 1)
		h.Add(h, le(blk))
		h.Mul(h, r)
		h.Mod(h, p)
		msg = msg[n:]
	}
	h.Add(h, le(key[16:]))
	var out [16]byte
	b := h.Bytes()
	for i := 0; i < len(b) && i < 16; i++ {
		out[i] = b[len(b)-1-i]
	}
	return out
}

func TestPolyBigReference(t *testing.T) {
	r := polyRand(t)
	var key [32]byte
	for _, n := range []int{0, 1, 16, 100, 128, 255, 256, 1000, 1440, 4097} {
		msg := make([]byte, n)
		polyFill(r, msg)
		polyFill(r, key[:])
		want := polyBig(msg, &key)
		var got [16]byte
		for _, p := range polyPaths {
			if polySkipPath(t, p.vector) {
				continue
			}
			polyTag(&got, msg, &key, false, p.vector)
			if got != want {
				t.Fatalf("%s len %d: got %x want %x", p.name, n, got, want)
			}
		}
	}
}

// TestPolyIFMAKernel calls the kernel directly and checks both its value
// (mod p, against math/big) and the limb bounds the Go side relies on
// (lane sums < 2^47, 2^47+2^9, 2^45).
func TestPolyIFMAKernel(t *testing.T) {
	if !useIFMA {
		t.Skip("no AVX-512 F/VL/IFMA on this CPU/GOARCH: the IFMA kernel cannot run (the scalar path is tested elsewhere)")
	}
	const m44 = 1<<44 - 1
	p := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 130), big.NewInt(5))
	rnd := polyRand(t)
	ffKey := polyAdversarialKeys()[0]
	var key [32]byte
	for it := 0; it < 300; it++ {
		groups := 1 + rnd.IntN(20)
		msg := make([]byte, groups*128)
		switch it % 3 {
		case 0:
			polyFill(rnd, msg)
			polyFill(rnd, key[:])
		case 1:
			for i := range msg {
				msg[i] = 0xff
			}
			key = ffKey
		case 2:
			polyFill(rnd, msg)
			key = ffKey
		}
		r0 := binary.LittleEndian.Uint64(key[0:8]) & 0x0ffffffc0fffffff
		r1 := binary.LittleEndian.Uint64(key[8:16]) & 0x0ffffffc0ffffffc
		var h [3]uint64
		polyIFMA(&h, &msg[0], groups, r0&m44, (r0>>44|r1<<20)&m44, r1>>24)
		if h[0] >= 1<<47 || h[1] >= 1<<47+1<<9 || h[2] >= 1<<45 {
			t.Fatalf("lane sums out of bounds: %#x %#x %#x", h[0], h[1], h[2])
		}
		got := new(big.Int).SetUint64(h[2])
		got.Lsh(got, 44).Add(got, new(big.Int).SetUint64(h[1]))
		got.Lsh(got, 44).Add(got, new(big.Int).SetUint64(h[0]))
		got.Mod(got, p)

		// Reference: Horner over the blocks, s = 0, without the final mod 2^128.
		rr := new(big.Int).SetUint64(r1)
		rr.Lsh(rr, 64).Add(rr, new(big.Int).SetUint64(r0))
		want := new(big.Int)
		for i := 0; i < len(msg); i += 16 {
			m := new(big.Int).SetUint64(1)
			m.Lsh(m, 64).Add(m, new(big.Int).SetUint64(binary.LittleEndian.Uint64(msg[i+8:])))
			m.Lsh(m, 64).Add(m, new(big.Int).SetUint64(binary.LittleEndian.Uint64(msg[i:])))
			want.Add(want, m).Mul(want, rr).Mod(want, p)
		}
		if got.Cmp(want) != 0 {
			t.Fatalf("it %d groups %d: kernel %x, want %x", it, groups, got, want)
		}
	}
}

func TestPolyAllocs(t *testing.T) {
	msg := make([]byte, 1500)
	var key [32]byte
	var out [16]byte
	for _, n := range []int{0, 15, 64, 1440, 1455, 1500} {
		if a := testing.AllocsPerRun(100, func() { polySum(&out, msg[:n], &key) }); a != 0 {
			t.Errorf("polySum(%d) allocates %v", n, a)
		}
		if a := testing.AllocsPerRun(100, func() { polyAEAD(&out, msg[:n], &key) }); a != 0 {
			t.Errorf("polyAEAD(%d) allocates %v", n, a)
		}
	}
}

func polyFuzzKey(b []byte) *[32]byte {
	var k [32]byte
	copy(k[:], b)
	return &k
}

// FuzzPoly compares both entry points and both paths with x/crypto
// (polyCheck), for plain Poly1305 and the AEAD's padded message.
func FuzzPoly(f *testing.F) {
	f.Add(make([]byte, 32), []byte("Cryptographic Forum Research Group"))
	f.Add(bytes.Repeat([]byte{0xff}, 32), bytes.Repeat([]byte{0xff}, 1440))
	f.Add(bytes.Repeat([]byte{0xff}, 32), bytes.Repeat([]byte{0x00}, 300))
	f.Fuzz(func(t *testing.T, keyb, msg []byte) {
		polyCheck(t, polyFuzzKey(keyb), msg)
	})
}

var polyBenchSizes = []int{64, 256, 1440, 8192}

func polyBenchKey() *[32]byte {
	var k [32]byte
	for i := range k {
		k[i] = byte(i*7 + 1)
	}
	return &k
}

func BenchmarkPolyAEAD(b *testing.B) {
	key := polyBenchKey()
	for _, n := range polyBenchSizes {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			ct := make([]byte, n)
			var out [16]byte
			b.SetBytes(int64(n))
			for b.Loop() {
				polyAEAD(&out, ct, key)
			}
		})
	}
}

// x/crypto's poly1305.Sum over the explicitly padded message (its best case:
// no streaming overhead).
func BenchmarkXCryptoPolyAEAD(b *testing.B) {
	key := polyBenchKey()
	for _, n := range polyBenchSizes {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			m := polyPadded(make([]byte, n))
			var out [16]byte
			b.SetBytes(int64(n))
			for b.Loop() {
				poly1305.Sum(&out, m, key)
			}
		})
	}
}

// BenchmarkPolyCrossover times both forced paths at sizes around the
// threshold; polyVecMin is set from it.
func BenchmarkPolyCrossover(b *testing.B) {
	key := polyBenchKey()
	for n := 128; n <= 512; n += 64 {
		for _, p := range polyPaths {
			b.Run(fmt.Sprintf("%d/%s", n, p.name), func(b *testing.B) {
				if polySkipPath(b, p.vector) {
					b.SkipNow()
				}
				ct := make([]byte, n)
				var out [16]byte
				b.SetBytes(int64(n))
				for b.Loop() {
					polyTag(&out, ct, key, true, p.vector)
				}
			})
		}
	}
}

// BenchmarkPolyIFMAKernel times the kernel alone for 1, 2 and 11 groups of
// 128 bytes: the 1-group time minus the per-group increment is the fixed
// cost (r^2..r^8 setup, final per-lane multiply, lane sum).
func BenchmarkPolyIFMAKernel(b *testing.B) {
	if !useIFMA {
		b.Skip("no AVX-512 F/VL/IFMA on this CPU/GOARCH")
	}
	msg := make([]byte, 11*128)
	for _, g := range []int{1, 2, 11} {
		b.Run(strconv.Itoa(g), func(b *testing.B) {
			var h [3]uint64
			b.SetBytes(int64(g * 128))
			for b.Loop() {
				polyIFMA(&h, &msg[0], g, 0x0ffffffc0ff, 0xffffc0ffffc, 0x0ffffffc0)
			}
		})
	}
}
