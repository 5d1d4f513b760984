//go:build amd64 && !purego

package tun

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// The AVX2 sum and the plain Go one agree on every length (around the
// vector threshold and the 32- and 64-byte steps), at every alignment, and
// on words of all ones, where a dropped carry would show.
func TestSumLEAVX2MatchesGo(t *testing.T) {
	if !haveAVX2 {
		t.Skip("no AVX2 on this CPU")
	}
	r := rand.New(rand.NewPCG(7, 8))
	buf := make([]byte, 70000)
	for _, fill := range []string{"random", "ones"} {
		for i := range buf {
			buf[i] = byte(r.Uint32())
			if fill == "ones" {
				buf[i] = 0xff
			}
		}
		for n := 0; n < 70000; n += 1 + n/16 {
			for _, off := range []int{0, 1, 3, 8, 31} {
				if off+n > len(buf) {
					continue
				}
				b := buf[off : off+n]
				acc := r.Uint64()
				want := sumLEWith(b, acc, false)
				if got := sumLEWith(b, acc, true); foldLE(got) != foldLE(want) {
					t.Fatalf("%s, %d bytes at +%d: AVX2 %#x, Go %#x", fill, n, off, foldLE(got), foldLE(want))
				}
			}
		}
	}
	// The kernel of it, on its own: the plain total of the 32-bit words.
	for n := 0; n <= 4096; n += 32 {
		var want uint64
		for i := 0; i < n; i += 4 {
			want += uint64(binary.LittleEndian.Uint32(buf[i:]))
		}
		if got := sumWords32AVX2(buf[:n]); got != want {
			t.Fatalf("sumWords32AVX2 over %d bytes: %d, want %d", n, got, want)
		}
	}
}
