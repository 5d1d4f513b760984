package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestUnderlayMTU: a 9000-byte tunnel over a 1500-byte veth works. The
// peers' connected sockets know the path MTU (the veth's), so a full-size
// ping with DF is answered in the tunnel as a router would (fragmentation
// needed, with what fits), and TCP is clamped to it; a full-size ping
// without DF still gets through, its outer datagrams fragmented by the
// kernel as with kernel WireGuard (the bind clears DF and sends segments
// too big for GSO as plain datagrams). Over an IPv4 and an IPv6 underlay,
// TCP arrives byte-exact both ways, with no send errors on either side.
func TestUnderlayMTU(t *testing.T) {
	requireRoot(t)
	for _, v6 := range []bool{false, true} {
		t.Run(fmt.Sprintf("underlayV6=%v", v6), func(t *testing.T) {
			p := newPair(t, pairOpts{underlayMTU: 1500, tunMTU: 9000, underlayV6: v6})
			p.a.ns.waitPing(p.b.tun4, 20*time.Second)
			// What the path leaves inside, rounded down to the 16 bytes
			// WireGuard pads to (a 1420-byte packet in a 9000-byte tunnel
			// is padded to 1424): 1440 over IPv4, 1408 over IPv6.
			inner := (1500 - 60) &^ 15
			if v6 {
				inner = (1500 - 80) &^ 15
			}
			// The first full-size ping with DF teaches the sender's kernel the
			// MTU; after it, one without DF is fragmented inside (Linux) and
			// one with DF never leaves.
			// The device looks at the path MTU a moment after a session's
			// socket appears: a few tries.
			var r pingResult
			for try := 0; try < 10; try++ {
				if r = p.a.ns.ping(p.b.tun4, 1, 9000-28, true); strings.Contains(r.out, fmt.Sprintf("mtu = %d", inner)) {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			if !strings.Contains(r.out, fmt.Sprintf("mtu = %d", inner)) {
				t.Errorf("ping of 9000 bytes with DF: want fragmentation needed with mtu = %d\n%s", inner, r.out)
			}
			if r := p.a.ns.ping(p.b.tun4, 3, 9000-28, false, "-M", "dont", "-i", "0.1"); r.received != 3 {
				t.Errorf("ping of 9000 bytes without DF in the tunnel: %d of 3 replies\n%s", r.received, r.out)
			}
			tcpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5001),
				helperSpec{Bytes: 16 << 20, Seed: 1, Timeout: time.Minute})
			tcpTransfer(t, p.b.ns, p.a.ns, svc(p.a.tun6, 5002),
				helperSpec{Bytes: 16 << 20, Seed: 2, Timeout: time.Minute})
			for _, n := range []*node{p.a, p.b} {
				c := n.counters()
				t.Logf("%s: tx_send_errors %d, bind_send_errors %d, bind_gso_oversize %d, bind_gso_fallbacks %d",
					n.iface, c["tx_send_errors"], c["bind_send_errors"], c["bind_gso_oversize"], c["bind_gso_fallbacks"])
				if c["tx_send_errors"] != 0 || c["bind_send_errors"] != 0 {
					t.Errorf("%s: send errors with a tunnel MTU above the path MTU: tx_send_errors %d, bind_send_errors %d",
						n.iface, c["tx_send_errors"], c["bind_send_errors"])
				}
				if c["bind_gso_fallbacks"] != 0 {
					t.Errorf("%s: GSO turned off (bind_gso_fallbacks %d): an MTU refusal is not a GSO failure",
						n.iface, c["bind_gso_fallbacks"])
				}
			}
		})
	}
}
