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

// While on a stream, a UDP probe is due 5 s after the handshake that put
// the peer there, then 10 s and 20 s after each handshake the stream
// answered in place of a probe, then every probeEvery; never while on
// UDP. A new fall back starts the schedule again.
func TestFallbackProbeSchedule(t *testing.T) {
	var f fallback
	f.set(true)
	t0 := time.Unix(1000, 0)
	f.answeredAt(conn.TransportUDP, t0)
	if f.probeDue(t0.Add(time.Hour)) {
		t.Fatal("a probe is due on UDP")
	}
	// due checks that the next probe is due after exactly want from the
	// stream's answer at, and then, the probe unanswered, that the stream
	// answers Rekey-Timeout later; it returns that answer's time.
	due := func(at time.Time, want time.Duration) time.Time {
		t.Helper()
		if f.probeDue(at.Add(want - time.Millisecond)) {
			t.Fatalf("probe due before %v", want)
		}
		if !f.probeDue(at.Add(want)) {
			t.Fatalf("no probe %v after the stream's answer", want)
		}
		if f.probeDue(at.Add(want + time.Second)) {
			t.Fatal("a second probe right after the first")
		}
		next := at.Add(want + 5*time.Second)
		f.answeredAt(conn.TransportTCP, next)
		return next
	}
	at := t0
	f.answeredAt(conn.TransportTCP, at) // the fall back
	for _, want := range []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, probeEvery, probeEvery, probeEvery} {
		at = due(at, want)
	}
	// A probe answered over UDP, and later another fall back: the
	// schedule starts again.
	f.answeredAt(conn.TransportUDP, at)
	if f.probeDue(at.Add(time.Hour)) {
		t.Fatal("a probe is due back on UDP")
	}
	at = at.Add(time.Hour)
	f.answeredAt(conn.TransportTLS, at)
	at = due(at, 5*time.Second)
	due(at, 10*time.Second)
	// A probe that started a handshake which nothing answered is tried
	// again after probeEvery.
	stuck := at.Add(time.Minute)
	if !f.probeDue(stuck) || f.probeDue(stuck.Add(probeEvery-time.Second)) || !f.probeDue(stuck.Add(probeEvery)) {
		t.Fatal("an unanswered probe is not retried after probeEvery")
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
