package e2e

import (
	"net/netip"
	"testing"
	"time"
)

// minBytesPerTUNRead is what the gateway's TUN reads must average for the
// test to call them super-packets: four full-size packets at MTU 1420. A
// kernel that cuts forwarded super-packets in software before the TUN
// hands the daemon one packet per read (at most 1,420 bytes, less with
// ACKs among them); with TSO reaching the TUN a bulk stream arrives in
// reads of tens of KiB. The bound is far from both, so it needs no quiet
// machine: a slow sender's TCP still builds super-packets of several
// segments.
const minBytesPerTUNRead = 4 * 1420

// TestGatewaySuperPackets: a bulk TCP stream that the gateway forwards
// into its tunnel (far host -> gateway -> tunnel -> client) reaches the
// gateway's daemon as TSO super-packets, not one packet per TUN read, both
// through a MASQUERADE rule and plainly routed, and so does a stream the
// gateway sends itself (the endpoint case). Asserted from the daemon's
// own counters (tx_tun_read_bytes over tx_tun_reads, from `fips-go show`),
// not from a timing. A GSO maximum on the TUN below the size of forwarded
// super-packets made the kernel segment each of them in software and
// halved a NAT gateway's throughput; this catches that class of change.
func TestGatewaySuperPackets(t *testing.T) {
	requireRoot(t)
	requireTool(t, "wg", "ping", "iptables", "iperf3")
	nsC, nsG, nsF := newNetns(t), newNetns(t), newNetns(t)
	under := connect(t, nsC, nsG, 1, 0) // C 10.1.0.1, G 10.1.0.2: the tunnel's underlay
	far := connect(t, nsG, nsF, 2, 0)   // G 10.2.0.1, F 10.2.0.2: the network behind G
	nsG.sysctl("net.ipv4.ip_forward", "1")

	c := startNode(t, nsC, fipsGo(t), "fgwC")
	g := startNode(t, nsG, fipsGo(t), "fgwG")
	c.port, g.port = 51820, 51821
	c.tun4, g.tun4 = netip.MustParseAddr("10.200.0.1"), netip.MustParseAddr("10.200.0.2")
	c.configure("wg", g, peerOpts{endpoint: netip.AddrPortFrom(under.v4B, uint16(g.port))})
	g.configure("wg", c, peerOpts{endpoint: netip.AddrPortFrom(under.v4A, uint16(c.port))})
	// C sends the far network through the tunnel.
	farNet := netip.PrefixFrom(far.v4A, 24).Masked()
	c.wg("set", c.iface, "peer", g.key.pub, "allowed-ips", g.tun4.String()+"/32,"+farNet.String())
	c.up(1420)
	g.up(1420)
	c.ns.Run("ip", "route", "add", farNet.String(), "dev", c.iface)
	nsC.waitPing(g.tun4, 20*time.Second)

	// perRead has C pull a stream from server with iperf3 -R (so the NAT
	// case needs no route from the far host to the tunnel) and checks the
	// size of the gateway's TUN reads while it ran.
	perRead := func(t *testing.T, server *netns, addr netip.Addr) {
		t.Helper()
		before := g.counters()
		r := iperf(t, nsC, server, addr, 3, true)
		after := g.counters()
		reads := after["tx_tun_reads"] - before["tx_tun_reads"]
		bytes := after["tx_tun_read_bytes"] - before["tx_tun_read_bytes"]
		if reads == 0 {
			t.Fatalf("the gateway counted no TUN reads (tx_tun_reads missing from `fips-go show`?)")
		}
		avg := bytes / reads
		t.Logf("gateway TUN: %d reads, %d bytes, %d bytes per read (iperf3 %.0f Mbit/s)",
			reads, bytes, avg, r.End.SumReceived.BitsPerSecond/1e6)
		if avg < minBytesPerTUNRead {
			t.Fatalf("the gateway read %d bytes per TUN read, want at least %d: the kernel segments "+
				"the stream before the TUN (is the TUN's gso_max_size below the super-packets?)\n%s",
				avg, minBytesPerTUNRead, nsG.Run("ip", "-d", "link", "show", "dev", g.iface))
		}
	}

	t.Run("endpoint", func(t *testing.T) {
		perRead(t, nsG, g.tun4)
	})
	t.Run("routed", func(t *testing.T) {
		// F knows the tunnel's network lies behind G.
		nsF.Run("ip", "route", "replace", "10.200.0.0/24", "via", far.v4A.String())
		defer nsF.Run("ip", "route", "del", "10.200.0.0/24")
		if _, err := nsC.Try("ping", "-c", "1", "-W", "2", far.v4B.String()); err != nil {
			t.Fatalf("C cannot reach F through the gateway: %v", err)
		}
		perRead(t, nsF, far.v4B)
	})
	t.Run("nat", func(t *testing.T) {
		nsG.Run("iptables", "-t", "nat", "-A", "POSTROUTING", "-s", "10.200.0.0/24", "-o", far.ifA, "-j", "MASQUERADE")
		// F has no route back to the tunnel: only the MASQUERADE answers.
		if _, err := nsC.Try("ping", "-c", "1", "-W", "2", far.v4B.String()); err != nil {
			t.Fatalf("C cannot reach F through the NAT: %v", err)
		}
		perRead(t, nsF, far.v4B)
	})
}
