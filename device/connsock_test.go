package device

import (
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/tun/memtun"
)

// exchange sends one packet each way and checks both arrive.
func exchange(t *testing.T, a, b *node, seq uint32) {
	t.Helper()
	for _, dir := range [...]struct{ from, to *node }{{a, b}, {b, a}} {
		pkt := udpPacket(dir.from.addr, dir.to.addr, seq, 200)
		if err := dir.from.tun.(*memtun.Device).Inject(pkt); err != nil {
			t.Fatal(err)
		}
		if got := next(t, dir.to.tun, 10*time.Second); string(got) != string(pkt) {
			t.Fatalf("packet %d from %v changed in transit", seq, dir.from.addr)
		}
	}
}

// TestConnectedSocketsFallback: with an in-memory bind, which has no
// connected sockets, nothing is tracked and traffic flows as before (the
// Linux bind with them turned off: TestConnectedSocketsOff).
func TestConnectedSocketsFallback(t *testing.T) {
	a, b := memPair(t, membind.NetOptions{})
	for i := range 5 {
		exchange(t, a, b, uint32(i))
	}
	for _, n := range []*node{a, b} {
		if open, eps := n.dev.socks.count(); open != 0 || eps != 0 {
			t.Fatalf("%v: %d sockets for %d endpoints on an in-memory bind", n.addr, open, eps)
		}
	}
}
