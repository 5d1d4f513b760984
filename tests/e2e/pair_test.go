package e2e

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/fips-go/fips-go/internal/testkit/netnstest"
)

// ifaceDump is `wg show IFACE dump`: the interface line, then one per peer.
type ifaceDump struct {
	priv, pub string
	port      int
	fwmark    string
	peers     []peerDump
}

type peerDump struct {
	pub, psk, endpoint, allowed string
	handshake                   int64 // Unix seconds, 0: never
	rx, tx                      uint64
	keepalive                   string
}

func parseDump(s string) (ifaceDump, error) {
	var d ifaceDump
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) == 0 {
		return d, fmt.Errorf("empty dump")
	}
	f := strings.Split(lines[0], "\t")
	if len(f) != 4 {
		return d, fmt.Errorf("interface line has %d fields, want 4: %q", len(f), lines[0])
	}
	d.priv, d.pub, d.fwmark = f[0], f[1], f[3]
	d.port, _ = strconv.Atoi(f[2])
	for _, l := range lines[1:] {
		f := strings.Split(l, "\t")
		if len(f) != 8 {
			return d, fmt.Errorf("peer line has %d fields, want 8: %q", len(f), l)
		}
		p := peerDump{pub: f[0], psk: f[1], endpoint: f[2], allowed: f[3], keepalive: f[7]}
		var err1, err2, err3 error
		p.handshake, err1 = strconv.ParseInt(f[4], 10, 64)
		p.rx, err2 = strconv.ParseUint(f[5], 10, 64)
		p.tx, err3 = strconv.ParseUint(f[6], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return d, fmt.Errorf("bad numbers in peer line %q", l)
		}
		d.peers = append(d.peers, p)
	}
	return d, nil
}

// dump is `wg show IFACE dump`, parsed.
func (n *node) dump() ifaceDump {
	n.t.Helper()
	d, err := parseDump(n.wg("show", n.iface, "dump"))
	if err != nil {
		n.t.Fatal(err)
	}
	return d
}

// peer returns n's view of peer p from `wg show IFACE dump`.
func (n *node) peer(p *node) peerDump {
	n.t.Helper()
	for _, pd := range n.dump().peers {
		if pd.pub == p.key.pub {
			return pd
		}
	}
	n.t.Fatalf("%s has no peer %s", n.iface, p.key.pub)
	return peerDump{}
}

// pairOpts describe the common setup: two namespaces A and B joined by a
// veth, one WireGuard interface in each, peered with each other.
type pairOpts struct {
	implA, implB impl // zero: fips-go
	underlayV6   bool // endpoints are IPv6 addresses
	underlayMTU  int  // veth MTU, 0: 1500
	tunMTU       int  // tunnel MTU, 0: the implementation's default
	toolA, toolB string
	// Which side knows the other's endpoint; the other learns it from the
	// handshake. Both false means both know (the usual case).
	onlyAKnows, onlyBKnows bool
	keepaliveA, keepaliveB int
	noV6Overlay            bool // IPv4 overlay only, IPv6 off on the tunnel
	// obfsA and obfsB are `fips-go set IFACE` arguments (jc 4 ...) given
	// before the peers are configured.
	obfsA, obfsB []string
	routed       bool // A and B meet through a router namespace
}

type pair struct {
	a, b   *node
	link   *veth
	router *netns // when routed
}

const overlayPort = 51820

// newPair builds the common two-namespace setup and brings both tunnels up
// (10.200.0.1/24 and fd10::1/64 on A, .2 and ::2 on B), without traffic.
func newPair(t testing.TB, o pairOpts) *pair {
	t.Helper()
	requireRoot(t)
	requireTool(t, "wg", "ping")
	if o.implA.bin == "" {
		o.implA = fipsGo(t)
	}
	if o.implB.bin == "" {
		o.implB = fipsGo(t)
	}
	if o.toolA == "" {
		o.toolA = "wg"
	}
	if o.toolB == "" {
		o.toolB = "wg"
	}
	nsA, nsB := newNetns(t), newNetns(t)
	var v *veth
	var router *netns
	if o.routed {
		v, router = routedLink(t, nsA, nsB)
		v.underlayV6 = o.underlayV6
	} else {
		v = connect(t, nsA, nsB, 1, o.underlayMTU)
		v.underlayV6 = o.underlayV6
	}
	a := startNode(t, nsA, o.implA, netnstest.UniqueName("fwgA"))
	b := startNode(t, nsB, o.implB, netnstest.UniqueName("fwgB"))
	a.port, b.port = overlayPort, overlayPort+1
	a.tun4, a.tun6 = netip.MustParseAddr("10.200.0.1"), netip.MustParseAddr("fd10::1")
	b.tun4, b.tun6 = netip.MustParseAddr("10.200.0.2"), netip.MustParseAddr("fd10::2")
	if o.noV6Overlay {
		a.tun6, b.tun6 = netip.Addr{}, netip.Addr{}
	}
	epA, epB := peerOpts{keepalive: o.keepaliveA}, peerOpts{keepalive: o.keepaliveB}
	if !o.onlyBKnows {
		epA.endpoint = netip.AddrPortFrom(v.addrB(), uint16(b.port))
	}
	if !o.onlyAKnows {
		epB.endpoint = netip.AddrPortFrom(v.addrA(), uint16(a.port))
	}
	if len(o.obfsA) > 0 {
		a.fipsctl(append([]string{"set", a.iface}, o.obfsA...)...)
	}
	if len(o.obfsB) > 0 {
		b.fipsctl(append([]string{"set", b.iface}, o.obfsB...)...)
	}
	a.configure(o.toolA, b, epA)
	b.configure(o.toolB, a, epB)
	a.up(o.tunMTU)
	b.up(o.tunMTU)
	return &pair{a: a, b: b, link: v, router: router}
}
