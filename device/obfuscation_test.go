package device

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
	"github.com/fips-go/fips-go/tun/memtun"
)

// awgSample is the configuration the interop tests use with amneziawg-go.
var awgSample = Obfuscation{Jc: 4, Jmin: 40, Jmax: 70, S1: 52, S2: 37,
	H1: 1234567891, H2: 1234567892, H3: 1234567893, H4: 1234567894}

type wire struct {
	mu   sync.Mutex
	msgs []wireMsg
}

type wireMsg struct {
	from netip.AddrPort
	data []byte
}

func (w *wire) tap(from, _ netip.AddrPort, data []byte) {
	w.mu.Lock()
	w.msgs = append(w.msgs, wireMsg{from, data})
	w.mu.Unlock()
}

func (w *wire) snapshot() []wireMsg {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]wireMsg(nil), w.msgs...)
}

// obfsPair is memPair with the wire tapped and each side's obfuscation set
// before the peers are linked (nil: plain).
func obfsPair(t *testing.T, oa, ob *Obfuscation) (a, b *node, w *wire) {
	t.Helper()
	leakcheck.Check(t)
	w = &wire{}
	netw := membind.NewNetwork(membind.NetOptions{Tap: w.tap})
	hostA, hostB := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	a = newNode(t, memtun.New("a", 1420, 4096), netw.NewBind(hostA), addrA, hostA, Options{})
	b = newNode(t, memtun.New("b", 1420, 4096), netw.NewBind(hostB), addrB, hostB, Options{})
	for _, x := range []struct {
		n *node
		o *Obfuscation
	}{{a, oa}, {b, ob}} {
		if x.o != nil {
			if err := x.n.dev.Apply(&Config{Obfuscation: x.o}); err != nil {
				t.Fatal(err)
			}
		}
	}
	link(t, a, b)
	return a, b, w
}

func le32(b []byte) uint32 {
	if len(b) < 4 {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

// Both ends obfuscated: the tunnel works both ways, and the wire carries
// exactly AmneziaWG's layout: Jc junk datagrams of Jmin..Jmax bytes, then
// the initiation padded by S1 with H1; the response padded by S2 with H2;
// transport with H4; and no standard type word anywhere.
func TestObfuscatedTunnelWireFormat(t *testing.T) {
	o := awgSample
	a, b, w := obfsPair(t, &o, &o)
	pkt := udpPacket(addrA, addrB, 1, 100)
	a.tun.(*memtun.Device).Inject(pkt)
	if got := next(t, b.tun, 5*time.Second); string(got) != string(pkt) {
		t.Fatal("packet changed in transit")
	}
	back := udpPacket(addrB, addrA, 2, 1300)
	b.tun.(*memtun.Device).Inject(back)
	if got := next(t, a.tun, 5*time.Second); string(got) != string(back) {
		t.Fatal("reply changed in transit")
	}
	msgs := w.snapshot()
	var fromA, fromB []wireMsg
	for _, m := range msgs {
		if m.from == a.ep {
			fromA = append(fromA, m)
		} else {
			fromB = append(fromB, m)
		}
	}
	if len(fromA) < o.Jc+2 || len(fromB) < 2 {
		t.Fatalf("%d datagrams from a, %d from b", len(fromA), len(fromB))
	}
	for i := range o.Jc {
		if n := len(fromA[i].data); n < o.Jmin || n > o.Jmax {
			t.Errorf("junk %d is %d bytes, want %d..%d", i, n, o.Jmin, o.Jmax)
		}
	}
	init := fromA[o.Jc].data
	if len(init) != noise.InitiationSize+o.S1 || le32(init[o.S1:]) != o.H1 {
		t.Errorf("initiation: %d bytes, type word %d at %d", len(init), le32(init[o.S1:]), o.S1)
	}
	resp := fromB[0].data
	if len(resp) != noise.ResponseSize+o.S2 || le32(resp[o.S2:]) != o.H2 {
		t.Errorf("response: %d bytes, type word %d at %d", len(resp), le32(resp[min(o.S2, len(resp)):]), o.S2)
	}
	for _, m := range append(fromA[o.Jc+1:], fromB[1:]...) {
		if le32(m.data) != o.H4 {
			t.Errorf("datagram of %d bytes after the handshake has type word %d, want H4", len(m.data), le32(m.data))
		}
	}
	for _, m := range msgs {
		if typ := le32(m.data); typ >= 1 && typ <= 4 {
			t.Errorf("a %d-byte datagram starts with the standard type %d", len(m.data), typ)
		}
	}
	if c := counter(b.dev.Status(), "rx_drop_obfuscation"); c != uint64(o.Jc) {
		t.Errorf("b dropped %d datagrams as junk, want the %d junk datagrams", c, o.Jc)
	}
	if st := a.dev.Status(); st.Obfuscation != o {
		t.Errorf("status shows %+v, want %+v", st.Obfuscation, o)
	}
}

// Off, the wire is WireGuard's: a 148-byte initiation of type 1 first, no
// junk, a 92-byte response of type 2, transport of type 4.
func TestPlainWireIsWireGuard(t *testing.T) {
	a, b, w := obfsPair(t, nil, &Obfuscation{})
	a.tun.(*memtun.Device).Inject(udpPacket(addrA, addrB, 1, 100))
	next(t, b.tun, 5*time.Second)
	msgs := w.snapshot()
	if len(msgs) < 3 || len(msgs[0].data) != noise.InitiationSize || le32(msgs[0].data) != 1 ||
		len(msgs[1].data) != noise.ResponseSize || le32(msgs[1].data) != 2 || le32(msgs[2].data) != 4 {
		t.Fatalf("first datagrams are not WireGuard's: %d", len(msgs))
	}
}

// A plain initiator cannot reach an obfuscated responder: its initiation
// is dropped as unknown and counted, never answered.
func TestPlainInitiationToObfuscatedIsDropped(t *testing.T) {
	o := awgSample
	a, b, w := obfsPair(t, nil, &o)
	a.tun.(*memtun.Device).Inject(udpPacket(addrA, addrB, 1, 100))
	eventually(t, 5*time.Second, "b counts the plain initiation", func() bool {
		return counter(b.dev.Status(), "rx_drop_obfuscation") > 0
	})
	for _, m := range w.snapshot() {
		if m.from == b.ep {
			t.Fatalf("b answered with a %d-byte datagram", len(m.data))
		}
	}
	if c := counter(b.dev.Status(), "handshake_initiations_received"); c != 0 {
		t.Fatalf("b handled %d initiations", c)
	}
}

// An invalid set of parameters is refused whole and changes nothing.
func TestInvalidObfuscationChangesNothing(t *testing.T) {
	a, _ := memPair(t, membind.NetOptions{})
	o := awgSample
	if err := a.dev.Apply(&Config{Obfuscation: &o}); err != nil {
		t.Fatal(err)
	}
	port := uint16(4242)
	for _, bad := range []Obfuscation{
		{Jmin: 70, Jmax: 40}, {H1: 5, H2: 5}, {H1: 2}, {S1: 2000}, {Jc: -1}, {Jmax: 1300}, {S2: 56},
	} {
		err := a.dev.Apply(&Config{ListenPort: &port, Obfuscation: &bad})
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: got %v, want ErrInvalidConfig", bad, err)
		}
		if st := a.dev.Status(); st.Obfuscation != o || st.ListenPort == port {
			t.Errorf("%+v: the refused request changed the device", bad)
		}
	}
	// H values equal to their standard types mean "unset".
	if err := a.dev.Apply(&Config{Obfuscation: &Obfuscation{H1: 1, H2: 2, H3: 3, H4: 4}}); err != nil {
		t.Fatal(err)
	}
	if st := a.dev.Status(); st.Obfuscation != (Obfuscation{}) {
		t.Fatalf("standard types shown as %+v, want off", st.Obfuscation)
	}
}

// Under load, the cookie round trip works obfuscated: the reply carries
// H3, and the retry's MAC2 (over the initiation with H1 in it) is accepted.
func TestObfuscatedCookieReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := awgSample
		a, b, w := obfsPair(t, &o, &o)
		b.dev.flood.anonTime = nil // the cookie path
		b.dev.flood.load.Observe(1, 1, time.Now())
		a.tun.(*memtun.Device).Inject(udpPacket(addrA, addrB, 1, 100))
		next(t, b.tun, 10*time.Second)
		if c := counter(b.dev.Status(), "cookie_replies_sent"); c != 1 {
			t.Fatalf("b sent %d cookie replies, want 1", c)
		}
		if c := counter(a.dev.Status(), "rx_cookie_replies"); c != 1 {
			t.Fatalf("a took %d cookie replies, want 1", c)
		}
		replies := 0
		for _, m := range w.snapshot() {
			if m.from == b.ep && len(m.data) == noise.CookieReplySize && le32(m.data) == o.H3 {
				replies++
			}
		}
		if replies != 1 {
			t.Fatalf("%d cookie replies with H3 on the wire, want 1", replies)
		}
	})
}
