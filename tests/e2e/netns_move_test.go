package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/testkit/netnstest"
)

// TestNetnsMove: two fips-go daemons create their interfaces in one
// namespace and keep their UDP sockets there, on 127.0.0.1; the interfaces
// are then moved into two other namespaces (`ip link set IFACE netns NS`),
// where the tunnel MTU is set. The daemons must learn each MTU from the
// interface's new namespace: at MTUs 1420, 2000, 9000 and 34736 pings that
// fill the MTU with DF set get through, and TCP over the IPv4 and IPv6
// overlays arrives byte-exact; then the MTU goes up and down while two
// transfers run. Neither device may ever drop a packet as too big for its
// buffers (issue 8: TCP stalled after about 1 MB at any MTU above 1500).
func TestNetnsMove(t *testing.T) {
	requireRoot(t)
	requireTool(t, "wg", "ping")
	p := newMovedPair(t)
	p.a.ns.waitPing(p.b.tun4, 20*time.Second)

	for i, mtu := range []int{1420, 2000, 9000, 34736} {
		t.Run(strconv.Itoa(mtu), func(t *testing.T) {
			p.setMTU(t, mtu)
			for _, dst := range []netip.Addr{p.b.tun4, p.b.tun6} {
				overhead := 28 // IPv4 + ICMP headers
				if dst.Is6() {
					overhead = 48
				}
				// The interface lives in another namespace, where its MTU
				// is polled once a second: the first packet after a raise
				// may be read before the device knows, and is dropped and
				// counted (the TUN read fails). Every one after must pass.
				p.a.ns.ping(dst, 1, mtu-overhead, true)
				if r := p.a.ns.ping(dst, 3, mtu-overhead, true, "-i", "0.1"); r.received != 3 {
					t.Errorf("ping of %d bytes with DF at MTU %d: %d of 3 replies\n%s", mtu, mtu, r.received, r.out)
				}
			}
			tcpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5001),
				helperSpec{Bytes: 16 << 20, Seed: uint64(2 * i), Timeout: time.Minute})
			tcpTransfer(t, p.b.ns, p.a.ns, svc(p.a.tun6, 5002),
				helperSpec{Bytes: 16 << 20, Seed: uint64(2*i + 1), Timeout: time.Minute})
			p.noneTooBig(t)
		})
	}
	t.Run("live", func(t *testing.T) { p.liveMTUChanges(t) })
	t.Run("netns deleted", func(t *testing.T) { daemonEndsWithNetns(t, p.root) })
}

// daemonEndsWithNetns starts one more daemon in root, moves its interface
// into a namespace of its own, brings it up there and deletes that
// namespace. The interface goes with the namespace, so the daemon must
// exit and remove its UAPI socket, as wireguard-go does: nothing of
// fips-go's (a socket, a thread) may keep the namespace alive.
func daemonEndsWithNetns(t *testing.T, root *netns) {
	n := startNode(t, root, fipsGo(t), netnstest.UniqueName("fmvD"))
	away := netnstest.UniqueName("fe2e")
	if out, err := exec.Command("ip", "netns", "add", away).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v\n%s", away, err, out)
	}
	// Deleted by the test itself when all goes well.
	t.Cleanup(func() { exec.Command("ip", "netns", "del", away).Run() })
	root.Run("ip", "link", "set", "dev", n.iface, "netns", away)
	if out, err := exec.Command("ip", "-n", away, "link", "set", "dev", n.iface, "mtu", "9000", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip -n %s link set %s up: %v\n%s", away, n.iface, err, out)
	}
	// Give the daemon time to look at the interface in its new namespace
	// a few times: looking is what must leave nothing behind.
	time.Sleep(3 * time.Second)
	if out, err := exec.Command("ip", "netns", "del", away).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del %s: %v\n%s", away, err, out)
	}
	eventually(t, 5*time.Second, fmt.Sprintf("daemon %d exiting once the namespace of %s was deleted", n.pid, n.iface),
		func() bool { return !processAlive(n.pid) })
	eventually(t, 2*time.Second, "UAPI socket "+n.socketPath()+" removed", func() bool {
		_, err := os.Stat(n.socketPath())
		return errors.Is(err, fs.ErrNotExist)
	})
}

// liveMTUChanges runs two paced transfers while the MTU changes under them:
// the first starts at 1420 and sees the MTU rise to 34736, the second
// starts at 34736 (so its segments are large) and sees it fall to 2000 and
// rise to 9000.
func (p *movedPair) liveMTUChanges(t *testing.T) {
	p.setMTU(t, 1420)
	const size, rate = 24 << 20, 12 << 20 // two seconds each
	spec := helperSpec{Bytes: size, Rate: rate, Timeout: time.Minute}
	spec.Seed = 100
	src1, sink1 := startTCP(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5003), spec)
	waitProgress(t, sink1, size/4)
	p.setMTU(t, 34736)
	spec.Seed = 101
	src2, sink2 := startTCP(t, p.b.ns, p.a.ns, svc(p.a.tun6, 5004), spec)
	waitProgress(t, sink2, size/4)
	p.setMTU(t, 2000)
	waitProgress(t, sink2, size/2)
	p.setMTU(t, 9000)
	for _, tr := range []struct{ src, sink *helperProc }{{src1, sink1}, {src2, sink2}} {
		got := finishTCP(t, tr.src, tr.sink, size)
		t.Logf("TCP %s with live MTU changes: %d bytes intact in %.1f s", tr.sink.spec.Addr, got.Bytes, got.Seconds)
	}
	p.noneTooBig(t)
}

// waitProgress waits until the helper has reported at least n bytes.
func waitProgress(t *testing.T, h *helperProc, n int64) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("%s at %s passing %d bytes", h.spec.Mode, h.spec.Addr, n),
		func() bool { return h.progress.Load() >= n })
}

// movedPair is two fips-go daemons in root, whose interfaces live in a.ns
// and b.ns.
type movedPair struct {
	root *netns
	a, b *node
}

// newMovedPair starts both daemons in a namespace of their own, peers them
// over 127.0.0.1 there, moves each interface into its own namespace and
// gives it its overlay addresses (as newPair does) and brings it up.
func newMovedPair(t *testing.T) *movedPair {
	t.Helper()
	root, nsA, nsB := newNetns(t), newNetns(t), newNetns(t)
	a := startNode(t, root, fipsGo(t), netnstest.UniqueName("fmvA"))
	b := startNode(t, root, fipsGo(t), netnstest.UniqueName("fmvB"))
	a.port, b.port = overlayPort, overlayPort+1
	a.tun4, a.tun6 = netip.MustParseAddr("10.200.0.1"), netip.MustParseAddr("fd10::1")
	b.tun4, b.tun6 = netip.MustParseAddr("10.200.0.2"), netip.MustParseAddr("fd10::2")
	lo := netip.MustParseAddr("127.0.0.1")
	a.configure("wg", b, peerOpts{endpoint: netip.AddrPortFrom(lo, uint16(b.port))})
	b.configure("wg", a, peerOpts{endpoint: netip.AddrPortFrom(lo, uint16(a.port))})
	for _, m := range []struct {
		n  *node
		ns *netns
	}{{a, nsA}, {b, nsB}} {
		root.Run("ip", "link", "set", "dev", m.n.iface, "netns", m.ns.Name)
		// From here on the node's commands run where its interface is; wg
		// and fips-go show still reach the daemon through its UAPI socket
		// file, which every namespace sees.
		m.n.ns = m.ns
		m.n.up(1420)
	}
	return &movedPair{root: root, a: a, b: b}
}

// setMTU sets the tunnel MTU on both interfaces, in their namespaces.
func (p *movedPair) setMTU(t *testing.T, mtu int) {
	t.Helper()
	for _, n := range []*node{p.a, p.b} {
		n.ns.Run("ip", "link", "set", "dev", n.iface, "mtu", strconv.Itoa(mtu))
	}
}

// noneTooBig asserts that neither device has dropped a packet read from
// its TUN as too big for its buffers: the sign that it did not learn the
// MTU. Datagrams the bind dropped as too big on receive (bind_rx_oversize)
// are logged: they are the receive side's share of following an MTU
// increase, which TCP recovers from and the pings above catch.
func (p *movedPair) noneTooBig(t *testing.T) {
	t.Helper()
	for _, n := range []*node{p.a, p.b} {
		c := n.counters()
		if c["tx_drop_too_big"] != 0 {
			t.Errorf("%s: tx_drop_too_big = %d, want 0 (counters %v)", n.iface, c["tx_drop_too_big"], nonZero(c))
		}
		if c["bind_rx_oversize"] != 0 {
			t.Logf("%s: bind_rx_oversize = %d", n.iface, c["bind_rx_oversize"])
		}
	}
}
