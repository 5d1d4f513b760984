package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/testkit/netnstest"
)

// awgTools finds amneziawg-tools' awg and awg-quick: awg at $FIPS_AWG_BIN
// (awg-quick beside it) or both in PATH. Without them the test skips, also
// with FIPS_E2E=1: they are not packaged where CI runs, and CI cannot
// fetch their source.
func awgTools(t *testing.T) (awg, awgQuick string) {
	t.Helper()
	if p := os.Getenv("FIPS_AWG_BIN"); p != "" {
		q := filepath.Join(filepath.Dir(p), "awg-quick")
		for _, f := range []string{p, q} {
			if _, err := os.Stat(f); err != nil {
				t.Fatalf("FIPS_AWG_BIN=%s: %v", p, err)
			}
		}
		return p, q
	}
	awg, err1 := exec.LookPath("awg")
	awgQuick, err2 := exec.LookPath("awg-quick")
	if err1 != nil || err2 != nil {
		t.Skip("needs amneziawg-tools' awg and awg-quick in PATH, or FIPS_AWG_BIN=path/to/awg " +
			"(built with make from github.com/amnezia-vpn/amneziawg-tools, awg-quick beside it)")
	}
	return awg, awgQuick
}

// TestAWGTools: amneziawg-tools drive fips-go as they drive amneziawg-go.
// `awg-quick up` of a configuration with AmneziaWG keys, with
// WG_QUICK_USERSPACE_IMPLEMENTATION=fips-go, starts a fips-go daemon whose
// tunnel comes up with an obfuscated fips-go peer (so `awg setconf`
// delivered the keys); `awg set` changes one key and leaves the others;
// `awg show` and `awg showconf` show them; `awg setconf` of what showconf
// printed is accepted and the tunnel still works; `awg-quick down` stops
// the daemon and takes both socket names (wg's and awg's) away.
func TestAWGTools(t *testing.T) {
	requireRoot(t)
	awg, awgQuick := awgTools(t)
	requireTool(t, "ping", "bash")
	bin := binPath(t, binFipsGo)
	pathDir := t.TempDir()
	for name, target := range map[string]string{"fips-go": bin, "awg": awg, "awg-quick": awgQuick} {
		if err := os.Symlink(target, filepath.Join(pathDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	nsA, nsB := newNetns(t), newNetns(t)
	link := connect(t, nsA, nsB, 1, 0)
	b := startNode(t, nsB, fipsGo(t), netnstest.UniqueName("fawB"))
	b.port = 51821
	b.tun4 = netip.MustParseAddr("10.200.0.2")
	b.fipsctl(append([]string{"set", b.iface}, awgArgs...)...)

	iface := netnstest.UniqueName("fawQ")
	keyA := newKeyPair(t)
	conf := filepath.Join(t.TempDir(), iface+".conf")
	content := fmt.Sprintf(`[Interface]
PrivateKey = %s
Address = 10.200.0.1/24
ListenPort = 51820
MTU = 1380
Jc = 4
Jmin = 40
Jmax = 70
S1 = 52
S2 = 37
H1 = 1234567891
H2 = 1234567892
H3 = 1234567893
H4 = 1234567894

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
	awgSock := "/var/run/amneziawg/" + iface + ".sock"
	t.Cleanup(func() {
		if _, err := os.Stat(awgSock); err == nil {
			nsA.Try(append(env, "awg-quick", "down", conf)...)
		}
	})
	t.Log(nsA.Run(append(env, "awg-quick", "up", conf)...))
	pid := findDaemon(bin, iface)
	if pid == 0 {
		t.Fatalf("awg-quick up succeeded but no fips-go daemon runs for %s", iface)
	}
	nsA.waitPing(b.tun4, 20*time.Second)

	run := func(args ...string) string {
		t.Helper()
		return strings.TrimSpace(nsA.Run(append(append(env, "awg"), args...)...))
	}
	run("set", iface, "jc", "6")
	if got := run("show", iface, "jc"); got != "6" {
		t.Errorf("awg show jc after awg set jc 6: %q", got)
	}
	if got := run("show", iface, "s1"); got != "52" {
		t.Errorf("awg show s1 after awg set jc 6: %q, want the configured 52 kept", got)
	}
	show := run("show", iface)
	for _, want := range []string{"jc: 6", "jmin: 40", "s2: 37", "h4: 1234567894"} {
		if !strings.Contains(show, want) {
			t.Errorf("awg show lacks %q:\n%s", want, show)
		}
	}
	if strings.Contains(show, ": 0\n") {
		t.Errorf("awg show shows a zero:\n%s", show)
	}
	showconf := run("showconf", iface)
	for _, want := range []string{"Jc = 6", "S1 = 52", "H1 = 1234567891"} {
		if !strings.Contains(showconf, want) {
			t.Errorf("awg showconf lacks %q:\n%s", want, showconf)
		}
	}
	saved := filepath.Join(t.TempDir(), "saved.conf")
	if err := os.WriteFile(saved, []byte(showconf+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run("setconf", iface, saved)
	if r := nsA.ping(b.tun4, 3, 56, true, "-i", "0.2"); r.received != 3 {
		t.Errorf("after awg setconf of awg showconf: %d of %d replies\n%s", r.received, r.sent, r.out)
	}

	t.Log(nsA.Run(append(env, "awg-quick", "down", conf)...))
	eventually(t, 2*time.Second, "fips-go exits after awg-quick down", func() bool { return !processAlive(pid) })
	for _, p := range []string{awgSock, "/var/run/wireguard/" + iface + ".sock"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s still exists after awg-quick down", p)
		}
	}
}
