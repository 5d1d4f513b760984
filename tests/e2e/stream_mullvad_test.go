package e2e

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// udpOverTCP finds a binary of Mullvad's udp-over-tcp (tcp2udp or
// udp2tcp): in $FIPS_UDP_OVER_TCP_DIR, else on $PATH. They are Rust
// programs, built with `cargo build --release --features clap` from
// github.com/mullvad/udp-over-tcp; the test skips without them.
func udpOverTCP(t *testing.T, name string) string {
	t.Helper()
	if dir := os.Getenv("FIPS_UDP_OVER_TCP_DIR"); dir != "" {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("Mullvad's %s not found (set FIPS_UDP_OVER_TCP_DIR or put it on PATH; build it with cargo from github.com/mullvad/udp-over-tcp)", name)
	}
	return p
}

// background runs args in ns until the test ends.
func background(t *testing.T, ns *netns, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := ns.Command(ctx, args...)
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
	})
	time.Sleep(200 * time.Millisecond) // let it bind
}

// TestStreamInteropMullvad: fips-go's stream transport against Mullvad's
// udp-over-tcp, both ways, with all UDP dropped between the namespaces.
// A fips-go client dials tcp2udp, which hands the datagrams to a fips-go
// server that knows only UDP; and a stock wireguard-go client, through
// udp2tcp, reaches a fips-go server's stream listener.
func TestStreamInteropMullvad(t *testing.T) {
	requireRoot(t)
	requireTool(t, "iptables")
	t.Run("fips-go-to-tcp2udp", func(t *testing.T) {
		bin := udpOverTCP(t, "tcp2udp")
		p := newPair(t, pairOpts{routed: true, noV6Overlay: true, onlyAKnows: true})
		p.router.Run(append([]string{"iptables", "-A"}, dropAllUDP...)...)
		background(t, p.b.ns, bin, "--tcp-listen", "0.0.0.0:443", "--udp-forward", "127.0.0.1:"+strconv.Itoa(p.b.port))
		ep := netip.AddrPortFrom(p.link.addrB(), 443)
		p.a.fipsctl("set", p.a.iface, "peer", p.b.key.pub, "endpoint", ep.String(), "transport", "tcp")
		p.a.ns.waitPing(p.b.tun4, 10*time.Second)
		tcpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5031), helperSpec{Bytes: 8 << 20, Seed: 51})
		tcpTransfer(t, p.b.ns, p.a.ns, svc(p.a.tun4, 5032), helperSpec{Bytes: 8 << 20, Seed: 52})
	})
	t.Run("wireguard-go-via-udp2tcp", func(t *testing.T) {
		bin := udpOverTCP(t, "udp2tcp")
		p := newPair(t, pairOpts{implA: wireguardGo(t), routed: true, noV6Overlay: true, onlyAKnows: true})
		p.router.Run(append([]string{"iptables", "-A"}, dropAllUDP...)...)
		p.b.fipsctl("set", p.b.iface, "tcp-listen", "443")
		ep := netip.AddrPortFrom(p.link.addrB(), 443)
		background(t, p.a.ns, bin, "--udp-listen", "127.0.0.1:51900", "--tcp-forward", ep.String())
		p.a.wg("set", p.a.iface, "peer", p.b.key.pub, "endpoint", "127.0.0.1:51900")
		p.a.ns.waitPing(p.b.tun4, 10*time.Second)
		tcpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5033), helperSpec{Bytes: 8 << 20, Seed: 53})
		if c := p.b.counters()["stream_conns_accepted"]; c < 1 {
			t.Errorf("stream_conns_accepted = %d", c)
		}
	})
}
