package device

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/tun/memtun"
)

// endpointOf is where n's device currently sends to peer p.
func endpointOf(t testing.TB, n, p *node) netip.AddrPort {
	t.Helper()
	for _, ps := range n.dev.Status().Peers {
		if ps.PublicKey == p.key.PublicKey() {
			return ps.Endpoint
		}
	}
	t.Fatalf("no peer %v", p.key.PublicKey())
	return netip.AddrPort{}
}

// Only an authenticated, fresh transport packet moves a peer's endpoint
// (roaming). An on-path attacker who replays a captured transport packet
// from an address of its own, or sends one whose ciphertext it altered,
// gets it dropped and counted, and the peer's endpoint stays where it
// was; the peer's own move to a new address is followed. Other
// implementations shipped regressions where a replayed packet redirected
// a session.
func TestRoamingNeedsAFreshAuthenticatedPacket(t *testing.T) {
	var mu sync.Mutex
	var captured [][]byte
	netw := membind.NewNetwork(membind.NetOptions{Tap: func(from, to netip.AddrPort, data []byte) {
		if len(data) > 16 && data[0] == byte(noise.TypeTransport) {
			mu.Lock()
			captured = append(captured, data)
			mu.Unlock()
		}
	}})
	a, b := memPairOn(t, netw)
	send := func(seq uint32) {
		t.Helper()
		if err := a.tun.(*memtun.Device).Inject(udpPacket(addrA, addrB, seq, 100)); err != nil {
			t.Fatal(err)
		}
		next(t, b.tun, 5*time.Second)
	}
	send(1)
	home := endpointOf(t, b, a)
	if home.Addr() != netip.MustParseAddr("192.0.2.1") {
		t.Fatalf("b's endpoint for a is %v, want a's address", home)
	}
	mu.Lock()
	if len(captured) == 0 {
		mu.Unlock()
		t.Fatal("no transport packet captured")
	}
	replay := captured[len(captured)-1]
	mu.Unlock()

	attacker := netw.NewBind(netip.MustParseAddr("192.0.2.66"))
	if _, _, err := attacker.Open(0); err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	forged := append([]byte(nil), replay...)
	forged[len(forged)-1] ^= 1 // the tag no longer matches
	before := b.dev.Status()
	if err := attacker.Send([][]byte{replay, forged}, conn.Endpoint{Dst: b.ep}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := b.dev.Status()
		replayed := counter(st, "rx_drop_replayed") - counter(before, "rx_drop_replayed")
		failed := counter(st, "rx_drop_decrypt_failed") - counter(before, "rx_drop_decrypt_failed")
		if replayed == 1 && failed == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replayed %d, decrypt failed %d; want 1 and 1", replayed, failed)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := endpointOf(t, b, a); got != home {
		t.Fatalf("a replayed or forged packet from %v moved b's endpoint for a from %v to %v",
			attacker.AddrPort(), home, got)
	}

	// The control: a itself moves, and b follows its next packet.
	moved := netip.MustParseAddr("192.0.2.77")
	if err := a.bind.(*membind.Bind).SetAddr(moved); err != nil {
		t.Fatal(err)
	}
	send(2)
	if got := endpointOf(t, b, a); got.Addr() != moved {
		t.Fatalf("after a moved to %v, b's endpoint for a is %v", moved, got)
	}
}
