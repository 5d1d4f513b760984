package noise

import (
	"testing"

	"golang.org/x/crypto/blake2s"
)

// TestMacStackMatchesXCrypto checks our stack-only keyed BLAKE2s-128
// against golang.org/x/crypto/blake2s for every message length up to four
// blocks (both sides of each block boundary) and both key sizes we use.
func TestMacStackMatchesXCrypto(t *testing.T) {
	r := seeded(9)
	msg := make([]byte, 4*64+1)
	r.Read(msg)
	for _, kl := range []int{1, 16, 32} {
		key := make([]byte, kl)
		r.Read(key)
		for n := 0; n <= len(msg); n++ {
			h, err := blake2s.New128(key)
			if err != nil {
				t.Fatal(err)
			}
			h.Write(msg[:n])
			want := h.Sum(nil)
			if got := macStack(key, msg[:n]); string(got[:]) != string(want) {
				t.Fatalf("key %d bytes, message %d bytes: %x, x/crypto %x", kl, n, got, want)
			}
		}
	}
	if got := macStack(make([]byte, 33), msg); got != ([macSize]byte{}) {
		t.Fatal("a 33-byte key gave a MAC")
	}
}

// TestCheckMAC2DoesNotAllocate: MAC2 is checked on the receive goroutine
// for every handshake message while under load, a flood's included.
func TestCheckMAC2DoesNotAllocate(t *testing.T) {
	s := newCookieSetup(t)
	s.fetchCookie(t, t0)
	s.gen.AddMACs(s.msg, t0)
	if !s.checker.CheckMAC2(s.msg, s.src, t0) {
		t.Fatal("valid MAC2 rejected")
	}
	if n := testing.AllocsPerRun(100, func() { s.checker.CheckMAC2(s.msg, s.src, t0) }); n != 0 {
		t.Fatalf("CheckMAC2 allocates %v times per message", n)
	}
}

func BenchmarkCookieCheckMAC2(b *testing.B) {
	s := newCookieSetup(b)
	s.fetchCookie(b, t0)
	s.gen.AddMACs(s.msg, t0)
	b.ReportAllocs()
	for b.Loop() {
		if !s.checker.CheckMAC2(s.msg, s.src, t0) {
			b.Fatal("rejected")
		}
	}
}

// BenchmarkCookieCheckMAC2Zero is a message without a cookie (a zero
// MAC2), as every message of a flood that does not answer cookie replies
// is: refused without computing the cookie and the MAC.
func BenchmarkCookieCheckMAC2Zero(b *testing.B) {
	s := newCookieSetup(b)
	s.fetchCookie(b, t0)
	clear(s.msg[InitiationSize-macSize:])
	b.ReportAllocs()
	for b.Loop() {
		if s.checker.CheckMAC2(s.msg, s.src, t0) {
			b.Fatal("zero MAC2 accepted")
		}
	}
}
