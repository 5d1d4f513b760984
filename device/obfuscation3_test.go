package device

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/tun/memtun"
)

// awg3Sample is awg2Sample with amneziawg-go 3.x's header protection
// (every S at least 12, the keystream's nonce).
var awg3Sample = func() Obfuscation {
	o := awg2Sample
	o.S3, o.S4 = 21, 16
	for i := range o.HeaderProtectionKey {
		o.HeaderProtectionKey[i] = byte(3 * i)
	}
	return o
}()

// With header protection the tunnel works both ways (full-size packets
// included), and no header crosses in the clear: no handshake message's
// type word is in its range, and transport's receiver index, the same
// for every packet of a session in the clear, differs from packet to
// packet.
func TestObfuscated3HeaderProtection(t *testing.T) {
	o := awg3Sample
	a, b, w := obfsPair(t, &o, &o)
	for _, size := range []int{100, 1420 - 28, 60, 200} {
		pkt := udpPacket(addrA, addrB, 1, size)
		a.tun.(*memtun.Device).Inject(pkt)
		if got := next(t, b.tun, 5*time.Second); !bytes.Equal(got, pkt) {
			t.Fatalf("%d-byte packet changed in transit", size)
		}
		back := udpPacket(addrB, addrA, 2, size)
		b.tun.(*memtun.Device).Inject(back)
		if got := next(t, a.tun, 5*time.Second); !bytes.Equal(got, back) {
			t.Fatalf("%d-byte reply changed in transit", size)
		}
	}
	receivers := map[uint32]bool{}
	for _, m := range w.snapshot() {
		switch len(m.data) {
		case o.S1 + noise.InitiationSize:
			if inRange(le32(m.data[o.S1:]), o.H1, o.H1Max) {
				t.Errorf("an initiation's type word crossed in the clear")
			}
		case o.S2 + noise.ResponseSize:
			if inRange(le32(m.data[o.S2:]), o.H2, o.H2Max) {
				t.Errorf("a response's type word crossed in the clear")
			}
		}
		if len(m.data) >= o.S4+noise.TransportOverhead && (len(m.data)-o.S4-noise.TransportOverhead)%16 == 0 {
			receivers[le32(m.data[o.S4+4:])] = true
		}
	}
	// In the clear there would be two: one session index per direction.
	if len(receivers) < 5 {
		t.Errorf("%d distinct receiver-index words on the wire, want them masked per packet", len(receivers))
	}
	if st := a.dev.Status(); st.Obfuscation != o {
		t.Errorf("status shows %+v, want %+v", st.Obfuscation, o)
	}
}

// Another key on one side: no session.
func TestObfuscated3WrongKey(t *testing.T) {
	o, p := awg3Sample, awg3Sample
	p.HeaderProtectionKey[5] ^= 0x40
	a, b, _ := obfsPair(t, &o, &p)
	a.tun.(*memtun.Device).Inject(udpPacket(addrA, addrB, 1, 100))
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if pkt, err := b.tun.(*memtun.Device).Next(ctx); err == nil {
		t.Fatalf("a %d-byte packet crossed with different header keys", len(pkt))
	}
	if n := counter(a.dev.Status(), "handshakes_completed"); n != 0 {
		t.Fatalf("%d handshakes completed with different header keys", n)
	}
}

// Under load, the masked cookie reply is unmasked and the handshake
// completes through it.
func TestObfuscated3CookieReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := awg3Sample
		a, b, w := obfsPair(t, &o, &o)
		b.dev.flood.anonTime = nil // the cookie path
		b.dev.flood.load.Observe(1, 1, time.Now())
		a.tun.(*memtun.Device).Inject(udpPacket(addrA, addrB, 1, 100))
		next(t, b.tun, 10*time.Second)
		replies := 0
		for _, m := range w.snapshot() {
			if m.from == b.ep && len(m.data) == o.S3+noise.CookieReplySize {
				replies++
			}
		}
		if replies != 1 {
			t.Fatalf("%d cookie replies on the wire, want 1", replies)
		}
	})
}

// Header protection needs 12 bytes of padding in front of every message.
func TestInvalidObfuscation3(t *testing.T) {
	a, _, _ := obfsPair(t, nil, nil)
	o := awg3Sample
	o.S2 = 11
	if err := a.dev.Apply(&Config{Obfuscation: &o}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("s2 11 with header protection: %v, want ErrInvalidConfig", err)
	}
}
