package e2e

import (
	"fmt"
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

// TestPathNarrowIPv4StockPeer: wireguard-go at B behind an IPv4 hop of 1280
// bytes, fips-go at A with nothing configured (no probes). A's datagrams
// leave with DF clear, so the router fragments them and, ICMP or not,
// nothing would ever tell A: the tunnel carried a quarter of what the path
// does, and B's datagrams (DF set, and GSO sends above B's link fail)
// never arrived. A's DF samples find the path: from the router's ICMP
// when it passes (the kernel's route), from the inner TCP's resends of
// the samples when it is dropped (the floor). Asserted: TCP intact both
// ways within the time limits, B to A on a connection opened after A
// knows (the MSS clamp of A's SYN-ACK keeps B's segments within the
// path), and A's show naming the path MTU and how it was learned.
func TestPathNarrowIPv4StockPeer(t *testing.T) {
	requireRoot(t)
	requireTool(t, "iptables")
	for _, drop := range []bool{false, true} {
		t.Run(fmt.Sprintf("dropICMP=%v", drop), func(t *testing.T) {
			p := newPair(t, pairOpts{routed: true, implA: fipsGo(t), implB: wireguardGo(t)})
			setFarMTU(p, 1280)
			want := "path mtu: 1280 (from the kernel's route)"
			if drop {
				p.router.Run("iptables", "-A", "FORWARD", "-p", "icmp", "--icmp-type", "fragmentation-needed", "-j", "DROP")
				p.router.Run("iptables", "-A", "OUTPUT", "-p", "icmp", "--icmp-type", "fragmentation-needed", "-j", "DROP")
				want = "path mtu: 1280 (a floor: full-size TCP segments vanished)"
			}
			p.a.ns.waitPing(p.b.tun4, 20*time.Second)
			// Transfers until A knows (a few samples, a quarter of a second
			// apart, each waiting up to a second for its verdict).
			spec := helperSpec{Bytes: 16 << 20, Seed: 31, Timeout: time.Minute}
			var show string
			port := 5013
			eventually(t, 30*time.Second, "A to learn the path MTU", func() bool {
				tcpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, port), spec)
				port++
				show = p.a.fipsctl("show", p.a.iface)
				return strings.Contains(show, want)
			})
			spec.Seed = 32
			tcpTransfer(t, p.b.ns, p.a.ns, svc(p.a.tun4, 5099), spec)
			if c := p.a.counters(); c["tx_pmtu_df_samples"] == 0 {
				t.Fatalf("tx_pmtu_df_samples is 0: %v", nonZero(c))
			}
			t.Logf("A: %s", show)
		})
	}
}
