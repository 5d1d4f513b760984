package e2e

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

// TestRoaming: B's underlay address changes in the middle of a TCP stream
// that B sends to A. A must follow B to its new address (A's wg show
// endpoint for B becomes the new address, learnt from authenticated
// packets), the stream must complete byte-exact, and A must reach B at the
// new address afterwards. Variants: an IPv4 address swap on the same link,
// the same over IPv6, and B moving to a second link (its default route
// moves and the old address goes away) while talking to A's address on
// loopback, reachable over either link.
func TestRoaming(t *testing.T) {
	requireRoot(t)
	cases := []struct {
		name string
		v6   bool
		// move changes B's address, given the second link if twoLinks,
		// and returns B's new endpoint.
		twoLinks bool
		move     func(t *testing.T, p *pair, second *veth) netip.AddrPort
	}{
		{"v4-address-swap", false, false, swapAddress(false)},
		{"v6-address-swap", true, false, swapAddress(true)},
		{"v4-switch-link", false, true, switchLink},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, pairOpts{underlayV6: tc.v6})
			var second *veth
			if tc.twoLinks {
				second = prepareTwoLinks(t, p)
			}
			p.b.ns.waitPing(p.a.tun4, 20*time.Second)
			const total = 48 << 20
			// Paced at 8 MB/s: about 6 s, so the move happens mid-stream.
			source, sink := startTCP(t, p.b.ns, p.a.ns, svc(p.a.tun4, 5001),
				helperSpec{Bytes: total, Rate: 8 << 20, Seed: 42, Timeout: 2 * time.Minute})
			eventually(t, 30*time.Second, "1 MiB of the stream arrives", func() bool {
				return sink.progress.Load() >= 1<<20
			})
			newEP := tc.move(t, p, second)
			if at := sink.progress.Load(); at >= total || sink.finished() {
				t.Fatalf("the stream was over (%d bytes) before B moved; nothing was tested", at)
			} else {
				t.Logf("B moved to %s after %s of %s", newEP, fmtBytes(at), fmtBytes(total))
			}
			eventually(t, 20*time.Second, fmt.Sprintf("A's endpoint for B becomes %s", newEP), func() bool {
				return p.a.peer(p.b).endpoint == newEP.String()
			})
			finishTCP(t, source, sink, total)
			if r := p.a.ns.ping(p.b.tun4, 3, 56, false, "-i", "0.2"); r.received != 3 {
				t.Errorf("after roaming, A->B ping: %d of %d replies\n%s", r.received, r.sent, r.out)
			}
			t.Logf("B's counters: %v", nonZero(p.b.counters()))
		})
	}
}

// swapAddress gives B's veth a new address (.3) and then removes the old
// one (.2), so B's packets leave from the new address.
func swapAddress(v6 bool) func(t *testing.T, p *pair, _ *veth) netip.AddrPort {
	return func(t *testing.T, p *pair, _ *veth) netip.AddrPort {
		l, ns := p.link, p.b.ns
		if v6 {
			newAddr := netip.MustParseAddr("fd00:1::3")
			ns.Run("ip", "addr", "add", newAddr.String()+"/64", "dev", l.ifB, "nodad")
			ns.Run("ip", "addr", "del", l.v6B.String()+"/64", "dev", l.ifB)
			return netip.AddrPortFrom(newAddr, uint16(p.b.port))
		}
		newAddr := netip.MustParseAddr("10.1.0.3")
		// Without promotion, deleting the primary address of a subnet
		// deletes its secondaries too, and B would be left with none.
		ns.sysctl("net.ipv4.conf."+l.ifB+".promote_secondaries", "1")
		ns.Run("ip", "addr", "add", newAddr.String()+"/24", "dev", l.ifB)
		ns.Run("ip", "addr", "del", l.v4B.String()+"/24", "dev", l.ifB)
		return netip.AddrPortFrom(newAddr, uint16(p.b.port))
	}
}

// prepareTwoLinks adds a second veth (10.2.0.0/24) between A and B, puts
// A's endpoint address 10.9.0.1 on A's loopback, and routes B to it over
// the first link by default route. It returns the second link.
func prepareTwoLinks(t *testing.T, p *pair) *veth {
	second := connect(t, p.a.ns, p.b.ns, 2, 0)
	p.a.ns.Run("ip", "addr", "add", "10.9.0.1/32", "dev", "lo")
	p.b.ns.Run("ip", "route", "add", "default", "via", p.link.v4A.String())
	p.b.wg("set", p.b.iface, "peer", p.a.key.pub, "endpoint", fmt.Sprintf("10.9.0.1:%d", p.a.port))
	return second
}

// switchLink moves B's default route to the second link and removes B's
// address on the first, as when a laptop leaves Wi-Fi for a wired link.
func switchLink(t *testing.T, p *pair, second *veth) netip.AddrPort {
	p.b.ns.Run("ip", "route", "replace", "default", "via", second.v4A.String())
	p.b.ns.Run("ip", "addr", "del", p.link.v4B.String()+"/24", "dev", p.link.ifB)
	return netip.AddrPortFrom(second.v4B, uint16(p.b.port))
}

// nonZero keeps the counters that are not zero, for logging.
func nonZero(m map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}
