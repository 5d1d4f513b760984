package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestPathBlackHoleStockPeer: wireguard-go at B, which answers no probes,
// behind an IPv6 hop of 1280 bytes whose packet-too-big the router drops:
// a black hole for A's full-size datagrams (IPv6 routers never fragment).
// fips-go at A learns it from the inner TCP's resends, lowers B's path MTU
// to the 1280-byte floor and tells A's stack, so TCP from A to B
// completes; from B to A the MSS clamp of A's SYN-ACK keeps B's segments
// within the floor. The B-to-A flow is inner IPv4: inner IPv6 packets are
// never below 1280 bytes, which a 1280-byte IPv6 path carries only
// fragmented, and wireguard-go does not fragment (EMSGSIZE). Asserted:
// both transfers intact within their time limits, and A's show naming
// the floor and its reason.
func TestPathBlackHoleStockPeer(t *testing.T) {
	requireRoot(t)
	requireTool(t, "iptables", "ip6tables")
	p := newPair(t, pairOpts{routed: true, underlayV6: true, implA: fipsGo(t), implB: wireguardGo(t)})
	setFarMTU(p, 1280)
	p.router.Run("ip6tables", "-A", "FORWARD", "-p", "icmpv6", "--icmpv6-type", "packet-too-big", "-j", "DROP")
	p.router.Run("ip6tables", "-A", "OUTPUT", "-p", "icmpv6", "--icmpv6-type", "packet-too-big", "-j", "DROP")
	p.a.ns.waitPing(p.b.tun4, 20*time.Second)
	spec := helperSpec{Bytes: 16 << 20, Seed: 21, Timeout: time.Minute}
	tcpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5011), spec)
	spec.Seed = 22
	tcpTransfer(t, p.b.ns, p.a.ns, svc(p.a.tun4, 5012), spec)
	show := p.a.fipsctl("show", p.a.iface)
	if !strings.Contains(show, "path mtu: 1280 (a floor: full-size TCP segments vanished)") {
		t.Fatalf("A's show names no floor learned from TCP:\n%s", show)
	}
	if c := p.a.counters(); c["tx_pmtu_tcp_black_holes"] == 0 {
		t.Fatalf("tx_pmtu_tcp_black_holes is 0: %v", nonZero(c))
	}
	t.Logf("A: %s", show)
}
