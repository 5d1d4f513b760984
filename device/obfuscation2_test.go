package device

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/tun/memtun"
)

// awg2Sample adds AmneziaWG 2.0's parameters: cookie and transport padding,
// type ranges and two signature packets.
var awg2Sample = Obfuscation{Jc: 3, Jmin: 40, Jmax: 70, S1: 52, S2: 37, S3: 21, S4: 13,
	H1: 100000, H1Max: 199999, H2: 200000, H2Max: 299999, H3: 300000, H3Max: 399999, H4: 400000, H4Max: 4000000000,
	I1: "<b 0xc0ffee> <r 8> <t>", I3: "<rc 5>"}

func inRange(w, lo, hi uint32) bool { return lo <= w && w <= hi }

// The AmneziaWG 2.0 layout on the wire: I1 and I3, then Jc junk, then the
// initiation (S1, a type in H1's range), the response (S2, H2), transport
// with S4 random bytes and a type in H4's range; packets of the largest
// size the MTU allows still cross (the buffers grew by S4).
func TestObfuscated2WireFormat(t *testing.T) {
	o := awg2Sample
	a, b, w := obfsPair(t, &o, &o)
	for _, size := range []int{100, 1420 - 28} {
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
	var fromA, fromB []wireMsg
	for _, m := range w.snapshot() {
		if m.from == a.ep {
			fromA = append(fromA, m)
		} else {
			fromB = append(fromB, m)
		}
	}
	if len(fromA) < 2+o.Jc+2 || len(fromB) < 3 {
		t.Fatalf("%d datagrams from a, %d from b", len(fromA), len(fromB))
	}
	if s := fromA[0].data; len(s) != 3+8+4 || !bytes.Equal(s[:3], []byte{0xc0, 0xff, 0xee}) {
		t.Errorf("I1 on the wire: % x", s)
	}
	if s := fromA[1].data; len(s) != 5 {
		t.Errorf("I3 on the wire: %q", s)
	}
	for i := 2; i < 2+o.Jc; i++ {
		if n := len(fromA[i].data); n < o.Jmin || n > o.Jmax {
			t.Errorf("junk %d is %d bytes, want %d..%d", i, n, o.Jmin, o.Jmax)
		}
	}
	init := fromA[2+o.Jc].data
	if len(init) != noise.InitiationSize+o.S1 || !inRange(le32(init[o.S1:]), o.H1, o.H1Max) {
		t.Errorf("initiation: %d bytes, type word %d at %d", len(init), le32(init[o.S1:]), o.S1)
	}
	resp := fromB[0].data
	if len(resp) != noise.ResponseSize+o.S2 || !inRange(le32(resp[o.S2:]), o.H2, o.H2Max) {
		t.Errorf("response: %d bytes", len(resp))
	}
	types := map[uint32]bool{}
	for _, m := range append(fromA[2+o.Jc+1:], fromB[1:]...) {
		w := le32(m.data[o.S4:])
		// Padded to 16 bytes, or to the MTU (1420) where that is less.
		if pt := len(m.data) - o.S4 - noise.TransportOverhead; !inRange(w, o.H4, o.H4Max) || pt%16 != 0 && pt != 1420 {
			t.Errorf("transport datagram of %d bytes has type word %d at %d", len(m.data), w, o.S4)
		}
		types[w] = true
	}
	if len(types) < 2 {
		t.Errorf("every transport datagram has the type word %v", types)
	}
	// Junk whose bytes at S4 fall in H4's wide range is taken for transport
	// and dropped for its unknown receiver index, as amneziawg-go would.
	st := b.dev.Status()
	if c := counter(st, "rx_drop_obfuscation") + counter(st, "rx_drop_unknown_index"); c != uint64(o.Jc+2) {
		t.Errorf("b dropped %d datagrams, want the %d junk and signature datagrams", c, o.Jc+2)
	}
	if st := a.dev.Status(); st.Obfuscation != o {
		t.Errorf("status shows %+v, want %+v", st.Obfuscation, o)
	}
}

// S4 on one side only: the handshake (which S4 does not pad) completes,
// and no transport message crosses.
func TestObfuscated2S4Mismatch(t *testing.T) {
	o := awg2Sample
	p := o
	p.S4 = 0
	a, b, _ := obfsPair(t, &o, &p)
	a.tun.(*memtun.Device).Inject(udpPacket(addrA, addrB, 1, 100))
	eventually(t, 5*time.Second, "the handshake", func() bool {
		return counter(a.dev.Status(), "handshakes_completed") > 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if pkt, err := b.tun.(*memtun.Device).Next(ctx); err == nil {
		t.Fatalf("a %d-byte packet crossed with S4 on one side only", len(pkt))
	}
}

// Under load, the cookie reply is padded by S3 and typed within H3, and
// the handshake completes through it.
func TestObfuscated2CookieReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := awg2Sample
		a, b, w := obfsPair(t, &o, &o)
		b.dev.flood.anonTime = nil // the cookie path
		b.dev.flood.load.Observe(1, 1, time.Now())
		a.tun.(*memtun.Device).Inject(udpPacket(addrA, addrB, 1, 100))
		next(t, b.tun, 10*time.Second)
		replies := 0
		for _, m := range w.snapshot() {
			if m.from == b.ep && len(m.data) == o.S3+noise.CookieReplySize && inRange(le32(m.data[o.S3:]), o.H3, o.H3Max) {
				replies++
			}
		}
		if replies != 1 {
			t.Fatalf("%d padded cookie replies on the wire, want 1", replies)
		}
	})
}

func TestInvalidObfuscation2(t *testing.T) {
	a, _ := memPair(t, membind.NetOptions{})
	for _, bad := range []Obfuscation{
		{S3: 1217}, {S4: 257}, {S4: -1}, {S2: 2, S3: 30}, {H1: 10, H1Max: 5}, {H1: 10, H1Max: 20, H2: 15},
		{H4: 1, H4Max: 9}, {I2: "<r 0>"}, {I5: "nonsense"},
	} {
		if err := a.dev.Apply(&Config{Obfuscation: &bad}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: got %v, want ErrInvalidConfig", bad, err)
		}
	}
}
