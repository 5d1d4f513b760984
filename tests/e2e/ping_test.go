package e2e

import (
	"net/netip"
	"testing"
	"time"
)

// TestPing: ping over an IPv4 and an IPv6 overlay, each carried over an
// IPv4 and an IPv6 underlay, fips-go on both ends. Every echo must come back,
// and each side's wg show must name the other's underlay address as its
// endpoint, in the underlay's family.
func TestPing(t *testing.T) {
	requireRoot(t)
	for _, tc := range []struct {
		name       string
		underlayV6 bool
		overlayV6  bool
	}{
		{"v4-over-v4", false, false},
		{"v6-over-v4", false, true},
		{"v4-over-v6", true, false},
		{"v6-over-v6", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, pairOpts{underlayV6: tc.underlayV6})
			dst := p.b.tun4
			if tc.overlayV6 {
				dst = p.b.tun6
			}
			p.a.ns.waitPing(dst, 20*time.Second)
			r := p.a.ns.ping(dst, 20, 1000, false, "-i", "0.05")
			if r.sent != 20 || r.received != 20 {
				t.Fatalf("ping %s: %d sent, %d received, want 20/20\n%s", dst, r.sent, r.received, r.out)
			}
			checkEndpoint(t, p.a, p.b, netip.AddrPortFrom(p.link.addrB(), uint16(p.b.port)))
			checkEndpoint(t, p.b, p.a, netip.AddrPortFrom(p.link.addrA(), uint16(p.a.port)))
		})
	}
}

// checkEndpoint asserts that n's endpoint for peer p is want.
func checkEndpoint(t *testing.T, n, p *node, want netip.AddrPort) {
	t.Helper()
	got := n.peer(p).endpoint
	if got != want.String() {
		t.Errorf("%s: endpoint for peer %s is %s, want %s", n.iface, p.iface, got, want)
	}
}
