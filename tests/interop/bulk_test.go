package interop

import (
	"net/netip"
	"testing"
	"time"

	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
)

// warmUp sends UDP datagrams from a to b through the tunnel until one
// arrives, which completes the handshake before a measurement or transfer.
func warmUp(t testing.TB, a, b node) {
	t.Helper()
	at := netip.AddrPortFrom(b.addr(), 9)
	pc, err := b.listenUDP(at)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	c, err := a.dialUDP(at)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 16)
	for range pingAttempts {
		if _, err := c.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		pc.SetReadDeadline(time.Now().Add(pingWait))
		if n, _, err := pc.ReadFrom(buf); err == nil && string(buf[:n]) == "hello" {
			return
		}
	}
	t.Fatalf("no datagram crossed from %s to %s", a.name(), b.name())
}

// newFipsPair starts two fips-go nodes (10.88.0.1 initiating, 10.88.0.2)
// that know each other's loopback endpoint, as `fips-go bench` does.
func newFipsPair(t testing.TB) (*fipsNode, *fipsNode) {
	a := newFipsNode(t, netip.MustParseAddr("10.88.0.1"), false)
	b := newFipsNode(t, netip.MustParseAddr("10.88.0.2"), false)
	lo := loopback(false)
	a.addPeer(t, b, netip.AddrPortFrom(lo, b.listenPort()), noise.PresharedKey{})
	b.addPeer(t, a, netip.AddrPortFrom(lo, a.listenPort()), noise.PresharedKey{})
	return a, b
}

// TestFipsPair1GiB moves 1 GiB of a pseudo-random stream over one TCP
// connection between two fips-go devices and checks it arrives byte for
// byte (length and SHA-256), that the devices dropped nothing for reasons
// a clean path never gives, and that closing them leaves no goroutine.
func TestFipsPair1GiB(t *testing.T) {
	if testing.Short() {
		t.Skip("1 GiB transfer skipped in -short mode")
	}
	leakcheck.Check(t)
	a, b := newFipsPair(t)
	warmUp(t, a, b)
	const size = 1 << 30
	transfer(t, a, b, 5201, size, 0x1a1b)
	for _, n := range []*fipsNode{a, b} {
		checkCounters(t, n, 0)
	}
	if rx := b.dev.Status().Peers[0].RxBytes; rx < size {
		t.Errorf("receiver counted %d bytes from its peer, want >= %d", rx, size)
	}
}
