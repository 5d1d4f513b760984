package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/testkit/netnstest"
)

// TestEndpointNameFollowsDNS: a config file names a peer by host name; the
// name first points at an address where nothing answers, then moves (the
// test rewrites /etc/hosts in a private mount namespace). The daemon sees
// its handshakes fail, resolves the name again and reconnects, without a
// restart; `fips-go show` shows the name, `wg show` the address.
func TestEndpointNameFollowsDNS(t *testing.T) {
	requireRoot(t)
	requireTool(t, "wg", "unshare", "nsenter")
	hosts := writeTemp(t, "hosts", "127.0.0.1 localhost\n10.77.0.9 peerb.test\n")
	os.Chmod(hosts, 0o644)
	a, b := netnstest.UniqueName("metrA"), netnstest.UniqueName("metrB")
	r := startPrivateHosts(t, hosts, a, b)
	// b listens on 10.77.0.1; 10.77.0.9, in the same subnet, answers nothing.
	r.run("ip", "link", "add", "metrv0", "type", "veth", "peer", "name", "metrv1")
	r.run("ip", "addr", "add", "10.77.0.1/24", "dev", "metrv0")
	r.run("ip", "link", "set", "metrv0", "up")
	r.run("ip", "link", "set", "metrv1", "up")
	ka, kb := newKeyPair(t), newKeyPair(t)
	r.run("wg", "set", b, "private-key", kb.privFile, "listen-port", "51841", "peer", ka.pub, "allowed-ips", "10.9.0.1/32")
	conf := writeTemp(t, "a.conf", "[Interface]\nPrivateKey = "+ka.priv+"\nListenPort = 51840\n\n"+
		"[Peer]\nPublicKey = "+kb.pub+"\nEndpoint = peerb.test:51841\nAllowedIPs = 10.9.0.2/32\nPersistentKeepalive = 1\n")
	bin := binPath(t, binFipsGo)
	r.run(bin, "setconf", a, conf)
	if got := r.run("wg", "show", a, "endpoints"); got != kb.pub+"\t10.77.0.9:51841\n" {
		t.Fatalf("endpoint before the move: %q", got)
	}
	if show := r.run(bin, "show", a); !strings.Contains(show, "endpoint name: peerb.test:51841") {
		t.Errorf("fips-go show does not name the endpoint:\n%s", show)
	}
	// The name moves to where b listens.
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n10.77.0.1 peerb.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	moved := time.Now()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("fips-go show %s:\n%s", a, r.run(bin, "show", a))
		}
	})
	eventually(t, 40*time.Second, "a handshake to the name's new address", func() bool {
		out := r.run("wg", "show", a, "latest-handshakes")
		return strings.HasPrefix(out, kb.pub+"\t") && out != kb.pub+"\t0\n"
	})
	t.Logf("reconnected %v after the name moved", time.Since(moved).Round(100*time.Millisecond))
	if got := r.run("wg", "show", a, "endpoints"); got != kb.pub+"\t10.77.0.1:51841\n" {
		t.Errorf("endpoint after the move: %q", got)
	}
	// An explicit address overrides the name: it is no longer followed.
	r.run("wg", "set", a, "peer", kb.pub, "endpoint", "10.77.0.1:51841")
	if show := r.run(bin, "show", a); strings.Contains(show, "endpoint name:") {
		t.Errorf("name still followed after wg set endpoint:\n%s", show)
	}
}
