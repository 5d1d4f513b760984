package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// pmtuLab is client A - router - server B, fips-go at both ends at the
// default tunnel MTU, the router's link towards B at farMTU (B's end too,
// so B's kernel knows it), the ICMP that would tell A dropped by the
// router when dropICMP.
func pmtuLab(t *testing.T, v6, dropICMP bool, farMTU int) *pair {
	t.Helper()
	return pmtuLabFar(t, v6, dropICMP, farMTU, impl{})
}

// pmtuLabFar is pmtuLab with far (zero: fips-go) at B.
func pmtuLabFar(t *testing.T, v6, dropICMP bool, farMTU int, far impl) *pair {
	t.Helper()
	requireTool(t, "iptables", "ip6tables")
	// fips-go runs with the probes that find a black hole without ICMP.
	probing := fipsGo(t)
	probing.env = append(probing.env, "FIPS_GO_PATH_PROBES=1")
	if far.bin == "" {
		far = probing
	}
	p := newPair(t, pairOpts{routed: true, underlayV6: v6, implA: probing, implB: far})
	setFarMTU(p, farMTU)
	if dropICMP {
		p.router.Run("iptables", "-A", "FORWARD", "-p", "icmp", "--icmp-type", "fragmentation-needed", "-j", "DROP")
		p.router.Run("ip6tables", "-A", "FORWARD", "-p", "icmpv6", "--icmpv6-type", "packet-too-big", "-j", "DROP")
		p.router.Run("iptables", "-A", "OUTPUT", "-p", "icmp", "--icmp-type", "fragmentation-needed", "-j", "DROP")
		p.router.Run("ip6tables", "-A", "OUTPUT", "-p", "icmpv6", "--icmpv6-type", "packet-too-big", "-j", "DROP")
	}
	return p
}

// pathMTURe finds the path MTU in `fips-go show`.
var pathMTURe = regexp.MustCompile(`path mtu: (\d+)`)

func setFarMTU(p *pair, mtu int) {
	p.router.Run("ip", "link", "set", "dev", p.link.farIf, "mtu", strconv.Itoa(mtu))
	p.b.ns.Run("ip", "link", "set", "dev", p.link.ifB, "mtu", strconv.Itoa(mtu))
}

// TestPathNarrowerThanTunnel: over a 1280-byte hop, with the ICMP that
// would say so passing or dropped, IPv4 and IPv6 underlay, 32 MB of TCP
// cross the default 1420-byte tunnel intact both ways; and a transfer
// during which the hop shrinks from 1500 to 1280 completes. What is
// asserted is completion, not speed (docs/benchmarks.md has the speeds).
func TestPathNarrowerThanTunnel(t *testing.T) {
	requireRoot(t)
	for _, v6 := range []bool{false, true} {
		for _, drop := range []bool{false, true} {
			t.Run(fmt.Sprintf("v6=%v/dropICMP=%v", v6, drop), func(t *testing.T) {
				p := pmtuLab(t, v6, drop, 1280)
				p.a.ns.waitPing(p.b.tun4, 20*time.Second)
				spec := helperSpec{Bytes: 32 << 20, Timeout: 3 * time.Minute}
				spec.Seed = 1
				tcpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5001), spec)
				spec.Seed = 2
				tcpTransfer(t, p.b.ns, p.a.ns, svc(p.a.tun6, 5002), spec)
				t.Logf("A: %s", p.a.fipsctl("show", p.a.iface))
			})
		}
	}
}

// TestPathNarrowerStockPeer: the same hop with wireguard-go at B, which
// neither answers probes nor knows anything of path MTUs. With the
// router's ICMP passing, A learns the path from the kernel (on IPv4 from
// the router's answers to its probes, as its other datagrams carry no DF)
// while full-size pings cross; after that, 8 MB of TCP cross intact both
// ways, IPv4 and IPv6 underlay. Not asserted, as it cannot work: a
// connection opened before A knows the path stalls B->A (nothing clamps
// its MSS, and wireguard-go's GSO sends above its 1280-byte link fail).
// The ICMP dropped: TestPathNarrowIPv4StockPeer, TestPathBlackHoleStockPeer.
func TestPathNarrowerStockPeer(t *testing.T) {
	requireRoot(t)
	for _, v6 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v6=%v/ICMP", v6), func(t *testing.T) {
			p := pmtuLabFar(t, v6, false, 1280, wireguardGo(t))
			p.a.ns.waitPing(p.b.tun4, 20*time.Second)
			eventually(t, 30*time.Second, "A to learn the path MTU", func() bool {
				p.a.ns.ping(p.b.tun4, 2, 1372, false, "-i", "0.2")
				m := pathMTURe.FindStringSubmatch(p.a.fipsctl("show", p.a.iface))
				n := 0
				if m != nil {
					n, _ = strconv.Atoi(m[1])
				}
				return n > 0 && n <= 1280
			})
			spec := helperSpec{Bytes: 8 << 20, Timeout: time.Minute}
			spec.Seed = 4
			tcpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5004), spec)
			spec.Seed = 5
			tcpTransfer(t, p.b.ns, p.a.ns, svc(p.a.tun4, 5005), spec)
			t.Logf("A: %s", p.a.fipsctl("show", p.a.iface))
		})
	}
}

// TestPathShrinksMidTransfer: the hop carries 1500 bytes when a transfer
// starts and 1280 from its third second on; the transfer completes.
func TestPathShrinksMidTransfer(t *testing.T) {
	requireRoot(t)
	for _, v6 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v6=%v/dropICMP", v6), func(t *testing.T) {
			p := pmtuLab(t, v6, true, 1500)
			p.a.ns.waitPing(p.b.tun4, 20*time.Second)
			spec := helperSpec{Bytes: 24 << 20, Rate: 4 << 20, Seed: 3, Timeout: 3 * time.Minute}
			source, sink := startTCP(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5003), spec)
			time.Sleep(3 * time.Second)
			setFarMTU(p, 1280)
			got := finishTCP(t, source, sink, spec.Bytes)
			t.Logf("%d bytes intact in %.1f s; A: %s", got.Bytes, got.Seconds, p.a.fipsctl("show", p.a.iface))
		})
	}
}
