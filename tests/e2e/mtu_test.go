package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestMTU: with the tunnel MTU set by `ip link set mtu` to 1280, 1420, 9000
// and 40000 (a jumbo size above 32 KiB) and the veth 80 bytes larger (the
// IPv6+UDP+WireGuard overhead), pings that fill the tunnel MTU exactly with
// the don't-fragment bit set get through over IPv4 and IPv6 overlays, one
// byte more is refused locally (so the MTU really is what we set), and a
// TCP transfer arrives byte-exact.
func TestMTU(t *testing.T) {
	requireRoot(t)
	for _, mtu := range []int{1280, 1420, 9000, 40000} {
		t.Run(fmt.Sprint(mtu), func(t *testing.T) {
			p := newPair(t, pairOpts{underlayMTU: mtu + 80, tunMTU: mtu})
			a := p.a.ns
			a.waitPing(p.b.tun4, 20*time.Second)
			for _, c := range []struct {
				name     string
				overhead int // IP + ICMP headers
			}{{"ipv4", 28}, {"ipv6", 48}} {
				dst := p.b.tun4
				if c.name == "ipv6" {
					dst = p.b.tun6
				}
				r := a.ping(dst, 5, mtu-c.overhead, true, "-i", "0.1")
				if r.sent != 5 || r.received != 5 {
					t.Errorf("%s ping of %d bytes with DF at MTU %d: %d sent, %d received, want 5/5\n%s",
						c.name, mtu, mtu, r.sent, r.received, r.out)
				}
				over := a.ping(dst, 1, mtu-c.overhead+1, true)
				if over.received != 0 || !strings.Contains(over.out, "too long") {
					t.Errorf("%s ping of %d bytes with DF at MTU %d: want a local 'message too long' error, got\n%s",
						c.name, mtu+1, mtu, over.out)
				}
			}
			tcpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5001),
				helperSpec{Bytes: 32 << 20, Seed: uint64(mtu), Timeout: 2 * time.Minute})
			tcpTransfer(t, p.b.ns, p.a.ns, svc(p.a.tun6, 5002),
				helperSpec{Bytes: 32 << 20, Seed: uint64(mtu) + 1, Timeout: 2 * time.Minute})
		})
	}
}
