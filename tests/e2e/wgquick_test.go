package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/testkit/netnstest"
)

// TestWgQuick: with WG_QUICK_USERSPACE_IMPLEMENTATION=fips-go and fips-go in
// PATH, `wg-quick up CONFIG` inside a namespace (no kernel WireGuard here,
// so it must fall back to the userspace implementation) starts a fips-go
// daemon that carries pings to a fips-go peer in another namespace, with
// the config's address, MTU and peer applied; `wg-quick down CONFIG` then
// makes the daemon exit within 2 s and takes the interface and socket away.
func TestWgQuick(t *testing.T) {
	requireRoot(t)
	requireTool(t, "wg-quick", "wg", "ping", "bash")
	// wg-quick runs "$WG_QUICK_USERSPACE_IMPLEMENTATION" "$INTERFACE"; offer
	// fips-go under that name whatever FIPS_GO_BIN is called.
	bin := binPath(t, binFipsGo)
	pathDir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(pathDir, "fips-go")); err != nil {
		t.Fatal(err)
	}
	nsA, nsB := newNetns(t), newNetns(t)
	link := connect(t, nsA, nsB, 1, 0)
	b := startNode(t, nsB, fipsGo(t), netnstest.UniqueName("fwgB"))
	b.port = 51821
	b.tun4 = netip.MustParseAddr("10.200.0.2")

	iface := netnstest.UniqueName("fwgQ")
	keyA := newKeyPair(t)
	conf := filepath.Join(t.TempDir(), iface+".conf")
	content := fmt.Sprintf(`[Interface]
PrivateKey = %s
Address = 10.200.0.1/24
ListenPort = 51820
MTU = 1380

[Peer]
PublicKey = %s
Endpoint = %s:%d
AllowedIPs = 10.200.0.2/32
`, keyA.priv, b.key.pub, link.v4B, b.port)
	if err := os.WriteFile(conf, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &node{t: t, ns: nsA, iface: iface, key: keyA, port: 51820, tun4: netip.MustParseAddr("10.200.0.1")}
	b.configure("wg", a, peerOpts{endpoint: svc(link.v4A, 51820)})
	b.up(0)

	env := []string{"env", "WG_QUICK_USERSPACE_IMPLEMENTATION=fips-go",
		"PATH=" + pathDir + ":" + os.Getenv("PATH"), "LOG_LEVEL=error"}
	t.Cleanup(func() {
		if _, err := os.Stat("/var/run/wireguard/" + iface + ".sock"); err == nil {
			nsA.Try(append(env, "wg-quick", "down", conf)...)
		}
	})
	t.Log(nsA.Run(append(env, "wg-quick", "up", conf)...))
	pid := findDaemon(bin, iface)
	if pid == 0 {
		t.Fatalf("wg-quick up succeeded but no fips-go daemon runs for %s", iface)
	}
	nsA.waitPing(b.tun4, 20*time.Second)
	if r := nsA.ping(b.tun4, 5, 1352, true, "-i", "0.1"); r.received != 5 {
		t.Errorf("ping filling the config's MTU 1380: %d of %d replies\n%s", r.received, r.sent, r.out)
	}
	if got := nsA.linkMTU(iface); got != 1380 {
		t.Errorf("wg-quick set MTU 1380, the interface has %d", got)
	}
	if pd := b.peer(a); pd.handshake == 0 {
		t.Errorf("B shows no handshake with the wg-quick interface")
	}

	t.Log(nsA.Run(append(env, "wg-quick", "down", conf)...))
	eventually(t, 2*time.Second, "fips-go exits after wg-quick down", func() bool { return !processAlive(pid) })
	if _, err := nsA.Try("ip", "link", "show", "dev", iface); err == nil {
		t.Errorf("%s still exists after wg-quick down", iface)
	}
	if _, err := os.Stat("/var/run/wireguard/" + iface + ".sock"); err == nil {
		t.Errorf("the UAPI socket of %s still exists after wg-quick down", iface)
	}
}

// linkMTU is dev's MTU inside ns.
func (ns *netns) linkMTU(dev string) int {
	ns.T.Helper()
	var mtu int
	out := ns.Run("cat", "/sys/class/net/"+dev+"/mtu")
	fmt.Sscanf(out, "%d", &mtu)
	return mtu
}
