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

// The policy, attempt by attempt: UDP; after one unanswered initiation,
// TCP with TLS raced behind it; on a stream, each new attempt probes UDP
// first, then the stream it is on, then races both again; a fixed
// transport is left alone.
func TestFallbackPick(t *testing.T) {
	udp := conn.Endpoint{Dst: netip.MustParseAddrPort("192.0.2.1:443"), Src: netip.MustParseAddr("192.0.2.9")}
	tcp := conn.Endpoint{Dst: udp.Dst, Transport: conn.TransportTCP}
	tls := conn.Endpoint{Dst: udp.Dst, Transport: conn.TransportTLS}
	race := attempt{first: tcp, race: tls}
	var f fallback
	if got := f.pick(udp); got != (attempt{first: udp}) {
		t.Fatalf("not auto: %+v", got)
	}
	f.set(true)
	if got := f.pick(udp); got != (attempt{first: udp}) {
		t.Fatalf("first initiation: %+v, want UDP", got)
	}
	if got := f.pick(udp); got != race {
		t.Fatalf("after one unanswered: %+v, want TCP raced by TLS", got)
	}
	if got := f.pick(udp); got != race {
		t.Fatalf("after an unanswered race: %+v, want the race again", got)
	}
	// TLS answered: the response's endpoint is the peer's now, and the
	// losing TCP connection is closed.
	if drop := f.answeredAt(conn.TransportTLS, time.Time{}); len(drop) != 1 || drop[0] != conn.TransportTCP {
		t.Fatalf("TLS won: drop %v, want TCP", drop)
	}
	if got := f.pick(tls); got.first.Transport != conn.TransportUDP || got.first.Dst != udp.Dst || got.race.Dst.IsValid() {
		t.Fatalf("rekey on the stream: %+v, want a UDP probe", got)
	}
	if got := f.pick(tls); got != (attempt{first: tls}) {
		t.Fatalf("after an unanswered probe: %+v, want the stream it is on", got)
	}
	if got := f.pick(tls); got != race {
		t.Fatalf("the stream does not answer either: %+v, want the race", got)
	}
	if drop := f.answeredAt(conn.TransportUDP, time.Time{}); len(drop) != 2 {
		t.Fatalf("back on UDP: drop %v, want both streams", drop)
	}
	// An answer over UDP moved the peer there (roaming): UDP again.
	if got := f.pick(udp); got != (attempt{first: udp}) {
		t.Fatalf("back on UDP: %+v", got)
	}
}

// While on a stream, a UDP probe is due every probeEvery, counted from the
// handshake that put the peer there; never while on UDP.
func TestFallbackProbeDue(t *testing.T) {
	var f fallback
	f.set(true)
	t0 := time.Unix(1000, 0)
	f.answeredAt(conn.TransportUDP, t0)
	if f.probeDue(t0.Add(time.Hour)) {
		t.Fatal("a probe is due on UDP")
	}
	f.answeredAt(conn.TransportTCP, t0)
	if f.probeDue(t0.Add(probeEvery - time.Second)) {
		t.Fatal("a probe is due early")
	}
	if !f.probeDue(t0.Add(probeEvery)) {
		t.Fatal("no probe after probeEvery")
	}
	if f.probeDue(t0.Add(probeEvery + time.Second)) {
		t.Fatal("a second probe right after the first")
	}
	if !f.probeDue(t0.Add(2 * probeEvery)) {
		t.Fatal("no probe after another probeEvery")
	}
	f.set(false)
	if f.probeDue(t0.Add(time.Hour)) {
		t.Fatal("a probe is due for a peer no longer auto")
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
