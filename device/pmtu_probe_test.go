package device

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/internal/packet"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
	"github.com/fips-go/fips-go/tun/memtun"
)

// probePair is memPair whose probes cross a path that carries datagrams
// of up to carries bytes (outer IPv4 header included; 0: none at all) and
// drops bigger ones without a word, as a path whose ICMP is filtered does.
// Ordinary datagrams are not limited: only the probes see the path.
func probePair(t *testing.T, carries int) (a, b *node, probes *atomic.Int64) {
	t.Helper()
	return probePairOpts(t, carries, true)
}

// probePairOpts is probePair with the devices' default for probes given.
func probePairOpts(t *testing.T, carries int, devProbes bool) (a, b *node, probes *atomic.Int64) {
	t.Helper()
	path := new(probePath)
	path.carries.Store(int64(carries))
	a, b = probeLab(t, path, devProbes)
	return a, b, &path.probes
}

// probePath is the path probes cross: carries can change mid-test.
type probePath struct {
	carries atomic.Int64 // largest datagram, outer IPv4 header included
	probes  atomic.Int64 // probes sent, both ways
}

func probeLab(t *testing.T, path *probePath, devProbes bool) (a, b *node) {
	t.Helper()
	leakcheck.Check(t)
	opts := Options{Logf: t.Logf, PathProbes: devProbes, probeSend: func(bind conn.Bind, dg []byte, ep conn.Endpoint) error {
		path.probes.Add(1)
		if int64(len(dg)+28) > path.carries.Load() {
			return nil
		}
		return bind.Send([][]byte{dg}, ep)
	}}
	netw := membind.NewNetwork(membind.NetOptions{})
	hostA, hostB := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	a = newNode(t, memtun.New("a", 1420, 4096), netw.NewBind(hostA), addrA, hostA, opts)
	b = newNode(t, memtun.New("b", 1420, 4096), netw.NewBind(hostB), addrB, hostB, opts)
	link(t, a, b)
	return a, b
}

func peerStats(t *testing.T, n *node) PeerStats {
	t.Helper()
	ps := n.dev.Stats(10).PeerStats
	if len(ps) != 1 {
		t.Fatalf("%d peers, want 1", len(ps))
	}
	return ps[0]
}

// TestPMTUProbeFindsBlackHole: a path that drops datagrams above 1280
// bytes with no ICMP is found by the probes (a plaintext of 1216, the
// largest multiple of 16 that fits: a path MTU of 1276), and a full-size
// packet is then answered with fragmentation-needed instead of being lost.
// Neither end's TUN sees a probe, and none counts as malformed.
func TestPMTUProbeFindsBlackHole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := probePair(t, 1280)
		exchange(t, a, b, 1)
		time.Sleep(time.Minute)
		synctest.Wait()
		for _, n := range []*node{a, b} {
			if ps := peerStats(t, n); ps.PathMTU != 1276 || ps.PathMTUSource != "probe" {
				t.Fatalf("path MTU %d (%s), want 1276 from the probes", ps.PathMTU, ps.PathMTUSource)
			}
			if c := counter(n.dev.Status(), "rx_drop_malformed_inner"); c != 0 {
				t.Fatalf("%d probes counted as malformed packets", c)
			}
			if c := counter(n.dev.Status(), "rx_pmtu_probes_answered"); c == 0 {
				t.Fatal("no probe answered")
			}
		}
		big := tcpPacket(t, addrA, addrB, packet.TCPAck, nil, 1420)
		if err := a.tun.(*memtun.Device).Inject(big); err != nil {
			t.Fatal(err)
		}
		r := next(t, a.tun, time.Minute)
		in, err := packet.Parse(r)
		if err != nil || in.Proto != packet.ProtoICMPv4 || in.ICMPType != 3 || in.ICMPCode != 4 {
			t.Fatalf("got %+v (%v), want fragmentation-needed", in, err)
		}
		if mtu := binary.BigEndian.Uint16(in.Transport[6:]); mtu != 1216 {
			t.Fatalf("next-hop MTU %d, want 1216", mtu)
		}
	})
}

// TestPMTUProbeFullPath: a path that carries the tunnel's MTU is confirmed
// by one probe each way, and full-size packets pass untouched (never
// worse than without probes).
func TestPMTUProbeFullPath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, probes := probePair(t, 1500)
		exchange(t, a, b, 1)
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := probes.Load(); n != 2 {
			t.Fatalf("%d probes sent, want one each way", n)
		}
		if ps := peerStats(t, a); ps.PathMTU != 1480 || ps.PathMTUSource != "probe" {
			t.Fatalf("path MTU %d (%s), want 1480 from the probes", ps.PathMTU, ps.PathMTUSource)
		}
		big := tcpPacket(t, addrA, addrB, packet.TCPAck, nil, 1420)
		if err := a.tun.(*memtun.Device).Inject(big); err != nil {
			t.Fatal(err)
		}
		if got := next(t, b.tun, time.Minute); !bytes.Equal(got, big) {
			t.Fatalf("b got %d bytes, want the full-size packet", len(got))
		}
	})
}

// TestPMTUProbeSilentPeer: probes that are never answered (a stock peer,
// or a path that carries none) cost three at the tunnel's MTU and three at
// the base size, then none until the next search ten minutes later
// however busy the peer is; the path MTU stays unknown and packets pass
// as before, except a DF sample (pmtu_df.go), which this path drops and
// the inner TCP would send again.
func TestPMTUProbeSilentPeer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, probes := probePair(t, 0)
		for i := range 60 { // a minute of traffic, a packet each way a second
			exchange(t, a, b, uint32(i))
			time.Sleep(time.Second)
		}
		synctest.Wait()
		if n := probes.Load(); n != 12 {
			t.Fatalf("%d probes sent, want 6 each way", n)
		}
		if ps := peerStats(t, a); ps.PathMTU != 0 {
			t.Fatalf("path MTU %d (%s), want unknown", ps.PathMTU, ps.PathMTUSource)
		}
		big := tcpPacket(t, addrA, addrB, packet.TCPAck, nil, 1420)
		if err := a.tun.(*memtun.Device).Inject(big); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if counter(a.dev.Status(), "tx_pmtu_df_samples") == 1 {
			if err := a.tun.(*memtun.Device).Inject(big); err != nil { // the resend
				t.Fatal(err)
			}
		}
		if got := next(t, b.tun, time.Minute); !bytes.Equal(got, big) {
			t.Fatalf("b got %d bytes, want the full-size packet", len(got))
		}
	})
}

// setPeerProbes configures n's peer other's path probes per peer.
func setPeerProbes(t *testing.T, n, other *node, on bool) {
	t.Helper()
	if err := n.dev.Apply(&Config{Peers: []PeerConfig{{PublicKey: other.key.PublicKey(), UpdateOnly: true, PathProbes: &on}}}); err != nil {
		t.Fatal(err)
	}
}

// TestPMTUProbePerPeerOn: with probes off device-wide, a peer configured
// with PathProbes on is probed and its black hole found; the status says
// so for it.
func TestPMTUProbePerPeerOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, probes := probePairOpts(t, 1280, false)
		setPeerProbes(t, a, b, true)
		exchange(t, a, b, 1)
		time.Sleep(time.Minute)
		synctest.Wait()
		if ps := peerStats(t, a); ps.PathMTU != 1276 || ps.PathMTUSource != "probe" {
			t.Fatalf("path MTU %d (%s), want 1276 from the probes", ps.PathMTU, ps.PathMTUSource)
		}
		st := a.dev.Status().Peers[0]
		if st.PathProbes == nil || !*st.PathProbes || !st.PathProbesOn {
			t.Fatalf("status: configured %v, on %v; want on, configured", st.PathProbes, st.PathProbesOn)
		}
		// b was not asked: it answers a's probes but sends none itself.
		if ps := peerStats(t, b); ps.PathMTU != 0 {
			t.Fatalf("b's path MTU %d (%s), want unknown: b sends no probes", ps.PathMTU, ps.PathMTUSource)
		}
		if bst := b.dev.Status().Peers[0]; bst.PathProbes != nil || bst.PathProbesOn {
			t.Fatalf("b's status: configured %v, on %v; want the device's default (off)", bst.PathProbes, bst.PathProbesOn)
		}
		if probes.Load() == 0 {
			t.Fatal("no probes sent")
		}
	})
}

// TestPMTUProbePerPeerOff: with probes on device-wide, a peer configured
// with PathProbes off is never probed (a stock peer); turning it off
// after a search forgets what the probes found.
func TestPMTUProbePerPeerOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, probes := probePairOpts(t, 1280, true)
		setPeerProbes(t, a, b, false)
		setPeerProbes(t, b, a, false)
		for i := range 30 {
			exchange(t, a, b, uint32(i))
			time.Sleep(time.Second)
		}
		synctest.Wait()
		if n := probes.Load(); n != 0 {
			t.Fatalf("%d probes sent to peers configured without them", n)
		}
		if st := a.dev.Status().Peers[0]; st.PathProbes == nil || *st.PathProbes || st.PathProbesOn {
			t.Fatalf("status: configured %v, on %v; want off, configured", st.PathProbes, st.PathProbesOn)
		}
		setPeerProbes(t, a, b, true)
		exchange(t, a, b, 100)
		time.Sleep(time.Minute)
		synctest.Wait()
		if ps := peerStats(t, a); ps.PathMTU != 1276 {
			t.Fatalf("path MTU %d (%s) after turning probes on, want 1276", ps.PathMTU, ps.PathMTUSource)
		}
		setPeerProbes(t, a, b, false)
		if ps := peerStats(t, a); ps.PathMTU != 0 {
			t.Fatalf("path MTU %d (%s) after turning probes off, want unknown", ps.PathMTU, ps.PathMTUSource)
		}
	})
}

// TestPMTUProbeRaiseIsFloor: a path found to carry the whole tunnel MTU
// is not capped at it when the tunnel MTU is raised: while the new search
// runs and after it, packets of the new size that the path carries pass,
// none answered with fragmentation-needed, and the search confirms the
// new top.
func TestPMTUProbeRaiseIsFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := probePair(t, 1600)
		exchange(t, a, b, 1)
		time.Sleep(time.Minute)
		synctest.Wait()
		if ps := peerStats(t, a); ps.PathMTU != 1480 {
			t.Fatalf("path MTU %d (%s), want 1480 (the tunnel MTU fits)", ps.PathMTU, ps.PathMTUSource)
		}
		for _, n := range []*node{a, b} {
			n.tun.(*memtun.Device).SetMTU(1500)
		}
		synctest.Wait()
		kernelRefresh(t, a, b)
		allPass(t, a, b, 1500, 50)
		time.Sleep(time.Minute)
		synctest.Wait()
		if ps := peerStats(t, a); ps.PathMTU != 1560 || ps.PathMTUSource != "probe" {
			t.Fatalf("path MTU %d (%s) after the raise, want 1560 from the probes", ps.PathMTU, ps.PathMTUSource)
		}
	})
}

// TestPMTUProbeRaiseNarrow: raised above what the path carries, the
// search goes up from the old tunnel MTU, a floor, and stops at the
// path's limit; while it runs, packets of the old tunnel MTU, which the
// path carries, pass and none is answered with fragmentation-needed.
func TestPMTUProbeRaiseNarrow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := probePair(t, 1520) // plaintexts up to 1460
		exchange(t, a, b, 1)
		time.Sleep(time.Minute)
		synctest.Wait()
		for _, n := range []*node{a, b} {
			n.tun.(*memtun.Device).SetMTU(1500)
		}
		synctest.Wait()
		allPass(t, a, b, 1420, 100)
		time.Sleep(time.Minute)
		synctest.Wait()
		if ps := peerStats(t, a); ps.PathMTU != 1456+60 || ps.PathMTUSource != "probe" {
			t.Fatalf("path MTU %d (%s), want %d from the probes", ps.PathMTU, ps.PathMTUSource, 1456+60)
		}
	})
}

// kernelRefresh recomputes n's path MTU for other as a refresh does when
// the peer's connected socket reports a kernel figure (the in-memory bind
// has none, so its refreshes leave the path MTU as it is).
func kernelRefresh(t *testing.T, n, other *node) {
	t.Helper()
	p := n.dev.lookupPeer(other.key.PublicKey())
	ep, ok := p.endpoint()
	if !ok {
		t.Fatal("no endpoint")
	}
	p.pathState().mu.Lock()
	p.setPathMTU(ep.Dst)
	p.pathState().mu.Unlock()
}

// untilPathMTU exchanges a packet each way every 100 ms (a busy peer)
// until a's path MTU for b is want, and returns how long that took.
func untilPathMTU(t *testing.T, a, b *node, want int, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for i := uint32(0); peerStats(t, a).PathMTU != want; i++ {
		if time.Since(start) > limit {
			ps := peerStats(t, a)
			t.Fatalf("after %v: path MTU %d (%s), want %d", time.Since(start), ps.PathMTU, ps.PathMTUSource, want)
		}
		exchange(t, a, b, i)
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start)
}

// TestPMTUProbeBlackHoleSeconds: a busy peer's black hole (the path
// drops every datagram above 1280 bytes and says nothing) is found within
// two seconds of its first packet; when a path that carried the tunnel
// MTU shrinks mid-transfer, within five; and on a steady path the
// confirmations cost one probe each way every 3 s.
func TestPMTUProbeBlackHoleSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := new(probePath)
		path.carries.Store(1280)
		a, b := probeLab(t, path, true)
		d := untilPathMTU(t, a, b, 1276, 2*time.Second)
		t.Logf("black hole found in %v", d)
	})
	synctest.Test(t, func(t *testing.T) {
		path := new(probePath)
		path.carries.Store(1500)
		a, b := probeLab(t, path, true)
		untilPathMTU(t, a, b, 1480, 3*time.Second)
		for i := range 100 { // ten steady seconds
			exchange(t, a, b, uint32(i))
			time.Sleep(100 * time.Millisecond)
		}
		before := path.probes.Load()
		for i := range 300 { // thirty more
			exchange(t, a, b, uint32(i))
			time.Sleep(100 * time.Millisecond)
		}
		if n := path.probes.Load() - before; n > 22 {
			t.Fatalf("%d probes in 30 steady seconds, want a confirmation each way every 3 s", n)
		}
		path.carries.Store(1280)
		d := untilPathMTU(t, a, b, 1276, 5*time.Second)
		t.Logf("shrink found in %v", d)
	})
}

// allPass sends n packets of size from a to b, 100 ms apart, and fails
// unless each arrives whole and none is answered with fragmentation-needed.
func allPass(t *testing.T, a, b *node, size, n int) {
	t.Helper()
	for i := range n {
		pkt := tcpPacket(t, addrA, addrB, packet.TCPAck, nil, size)
		if err := a.tun.(*memtun.Device).Inject(pkt); err != nil {
			t.Fatal(err)
		}
		if got := next(t, b.tun, time.Minute); !bytes.Equal(got, pkt) {
			t.Fatalf("after %d ms: b got %d bytes, want the %d-byte packet", i*100, len(got), size)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if c := counter(a.dev.Status(), "tx_pmtu_icmp_sent"); c != 0 {
		t.Fatalf("%d fragmentation-needed answers for packets the path carries", c)
	}
}
