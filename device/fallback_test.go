package device

import (
	"net/netip"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device/timers"
	"github.com/fips-go/fips-go/tun/memtun"
)

// The policy, attempt by attempt: UDP, then the stream after one
// unanswered initiation; on the stream, each new attempt probes UDP first
// and only that probe; a fixed transport is left alone.
func TestFallbackPick(t *testing.T) {
	udp := conn.Endpoint{Dst: netip.MustParseAddrPort("192.0.2.1:443"), Src: netip.MustParseAddr("192.0.2.9")}
	tcp := conn.Endpoint{Dst: udp.Dst, Transport: conn.TransportTCP}
	var f fallback
	if got, persist := f.pick(udp); got != udp || persist {
		t.Fatalf("not auto: %+v %v", got, persist)
	}
	f.set(true)
	if got, persist := f.pick(udp); got != udp || persist {
		t.Fatalf("first initiation: %+v %v, want UDP", got, persist)
	}
	got, persist := f.pick(udp)
	if got != tcp || !persist {
		t.Fatalf("after one unanswered: %+v %v, want the stream, persisted", got, persist)
	}
	f.answered() // the session is up on the stream
	if got, persist := f.pick(tcp); got.Transport != conn.TransportUDP || got.Dst != udp.Dst || persist {
		t.Fatalf("rekey on the stream: %+v %v, want a UDP probe", got, persist)
	}
	if got, persist := f.pick(tcp); got != tcp || persist {
		t.Fatalf("after an unanswered probe: %+v %v, want the stream", got, persist)
	}
	f.answered()
	// An answer over UDP moved the peer there (roaming): UDP again.
	if got, _ := f.pick(udp); got != udp {
		t.Fatalf("back on UDP: %+v", got)
	}
}

// A peer configured with transport auto, on a network that loses every
// UDP datagram, gets its tunnel over the stream after one unanswered
// initiation.
func TestFallbackToStreamWhenUDPIsLost(t *testing.T) {
	netw := membind.NewNetwork(membind.NetOptions{Loss: 1})
	short := timers.Params{RekeyTimeout: 200 * time.Millisecond}
	port := freeTCPPort(t)
	lo := netip.MustParseAddr("127.0.0.1")
	a := newNode(t, memtun.New("a", 1420, 4096), netw.NewBind(netip.MustParseAddr("192.0.2.1")), addrA, netip.MustParseAddr("192.0.2.1"), Options{Timers: short})
	b := newNode(t, memtun.New("b", 1420, 4096), netw.NewBind(lo), addrB, lo, Options{Timers: short, ListenPort: port})
	link(t, a, b)
	if err := b.dev.Apply(&Config{StreamListen: &StreamListen{On: true}}); err != nil {
		t.Fatal(err)
	}
	auto := conn.TransportAuto
	if err := a.dev.Apply(&Config{Peers: []PeerConfig{{PublicKey: b.key.PublicKey(), Transport: &auto}}}); err != nil {
		t.Fatal(err)
	}
	if ps := peerStatus(t, a, b); ps.Transport != conn.TransportUDP {
		t.Fatalf("auto starts on %v", ps.Transport)
	}
	pingPong(t, a, b, 1)
	if ps := peerStatus(t, a, b); ps.Transport != conn.TransportTCP || ps.Endpoint != b.ep {
		t.Fatalf("after the fallback a reaches b at %v via %v", ps.Endpoint, ps.Transport)
	}
	if netw.Stats().Lost == 0 {
		t.Fatal("no UDP initiation was tried first")
	}
}
