package e2e

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/testkit/netnstest"
)

// TestNAT: client C behind router R, which masquerades C's traffic towards
// server S; S has no route to C's network and no endpoint for C. C has S's
// endpoint and a persistent keepalive of 1 s. Asserted: S learns C's
// endpoint as R's outside address; with R's conntrack UDP timeouts cut to
// 3 s and the tunnel idle for 8 s, S still reaches C (the keepalives hold
// the mapping open); and, as a control, with the keepalive turned off the
// same idle time breaks S->C (so the timeouts really were short).
func TestNAT(t *testing.T) {
	requireRoot(t)
	requireTool(t, "wg", "ping", "iptables")
	nsC, nsR, nsS := newNetns(t), newNetns(t), newNetns(t)
	inside := connect(t, nsC, nsR, 1, 0)  // C 10.1.0.1, R 10.1.0.2
	outside := connect(t, nsR, nsS, 2, 0) // R 10.2.0.1, S 10.2.0.2
	nsC.Run("ip", "route", "add", "default", "via", inside.v4B.String())
	nsR.sysctl("net.ipv4.ip_forward", "1")
	nsR.Run("iptables", "-t", "nat", "-A", "POSTROUTING", "-o", outside.ifA, "-j", "MASQUERADE")

	c := startNode(t, nsC, fipsGo(t), netnstest.UniqueName("fwgC"))
	s := startNode(t, nsS, fipsGo(t), netnstest.UniqueName("fwgS"))
	c.port, s.port = 51820, 51821
	c.tun4, s.tun4 = netip.MustParseAddr("10.200.0.1"), netip.MustParseAddr("10.200.0.2")
	c.configure("wg", s, peerOpts{endpoint: netip.AddrPortFrom(outside.v4B, uint16(s.port)), keepalive: 1})
	s.configure("wg", c, peerOpts{})
	c.up(0)
	s.up(0)
	if ep := s.peer(c).endpoint; ep != "(none)" {
		t.Fatalf("S's endpoint for C before any traffic is %q, want (none)", ep)
	}
	if _, err := nsS.Try("ping", "-c", "1", "-W", "1", inside.v4A.String()); err == nil {
		t.Fatal("S can reach C's address directly; the NAT is not in the way")
	}

	nsC.waitPing(s.tun4, 20*time.Second)
	ep, err := netip.ParseAddrPort(s.peer(c).endpoint)
	if err != nil || ep.Addr() != outside.v4A {
		t.Fatalf("S's endpoint for C is %q, want R's outside address %s:PORT", s.peer(c).endpoint, outside.v4A)
	}
	t.Logf("S learnt C's endpoint through the NAT: %s", ep)
	if r := nsS.ping(c.tun4, 3, 56, false, "-i", "0.2"); r.received != 3 {
		t.Fatalf("S->C through the NAT: %d of %d replies\n%s", r.received, r.sent, r.out)
	}

	if !shortenConntrackUDP(t, nsR, 3) {
		t.Log("nf_conntrack UDP timeouts are not settable in the router namespace; skipping the idle checks")
		return
	}
	t.Run("keepalive-holds-mapping", func(t *testing.T) {
		time.Sleep(8 * time.Second) // idle, apart from C's keepalives
		if r := nsS.ping(c.tun4, 3, 56, false, "-i", "0.2"); r.received != 3 {
			t.Fatalf("after 8 s idle with 3 s conntrack timeouts, S->C failed despite 1 s keepalives\n%s\n%s",
				r.out, conntrackList(nsR))
		}
		if got := s.peer(c).endpoint; got != ep.String() {
			t.Logf("note: C's mapping changed from %s to %s", ep, got)
		}
	})
	t.Run("control-without-keepalive", func(t *testing.T) {
		c.wg("set", c.iface, "peer", s.key.pub, "persistent-keepalive", "off")
		time.Sleep(8 * time.Second)
		if r := nsS.ping(c.tun4, 3, 56, false, "-W", "1"); r.received != 0 {
			t.Fatalf("S->C still works after 8 s idle without keepalives; the conntrack timeout did not take effect\n%s", conntrackList(nsR))
		}
	})
}

// shortenConntrackUDP sets both UDP conntrack timeouts in ns to secs and
// reports whether that was possible. The stream timeout matters too: a
// mapping that has seen replies is "assured" and uses it.
func shortenConntrackUDP(t *testing.T, ns *netns, secs int) bool {
	for _, k := range []string{"nf_conntrack_udp_timeout", "nf_conntrack_udp_timeout_stream"} {
		if _, err := ns.Try("test", "-w", "/proc/sys/net/netfilter/"+k); err != nil {
			return false
		}
		ns.sysctl("net.netfilter."+k, fmt.Sprint(secs))
	}
	return true
}

// conntrackList is R's conntrack table for a failure message, if the
// conntrack tool or /proc/net/nf_conntrack is there.
func conntrackList(ns *netns) string {
	if _, err := exec.LookPath("conntrack"); err == nil {
		out, _ := ns.Try("conntrack", "-L", "-p", "udp")
		return "conntrack -L:\n" + out
	}
	out, _ := ns.Try("cat", "/proc/net/nf_conntrack")
	return "nf_conntrack:\n" + strings.TrimSpace(out)
}
