package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// amneziaWGVersion is the amneziawg-go release (AmneziaWG 1.0) fips-go's
// obfuscation is checked against; amneziaWG2Version the newest the module
// proxy serves, with AmneziaWG 2.0's parameters.
const (
	amneziaWGVersion  = "v0.2.12"
	amneziaWG2Version = "v0.2.19"
)

// awgArgs are the AmneziaWG 1.0 parameters both ends use, as `fips-go set`
// arguments.
var awgArgs = []string{"jc", "4", "jmin", "40", "jmax", "70", "s1", "52", "s2", "37",
	"h1", "1234567891", "h2", "1234567892", "h3", "1234567893", "h4", "1234567894"}

// awg2Args add AmneziaWG 2.0's: cookie and transport padding, type ranges,
// signature packets.
var awg2Args = []string{"jc", "4", "jmin", "40", "jmax", "70", "s1", "52", "s2", "37", "s3", "21", "s4", "13",
	"h1", "100000-199999", "h2", "200000-299999", "h3", "300000-399999", "h4", "400000-4000000000",
	"i1", "<b 0xc0ffee> <r 8> <t>", "i2", "<rc 6> <rd 4>"}

// buildAmneziaWG builds amneziawg-go at version from the module proxy, in
// a throwaway main module (it is no dependency of fips-go), as binary name.
// Its UAPI socket directory is moved to wireguard-go's, so that the tests'
// tools find it as they find every other daemon's.
func buildAmneziaWG(version, name string) buildResult {
	dir := filepath.Join(binDir, name+"-mod")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return buildResult{err: err}
	}
	mod := "module awgbuild\n\ngo 1.22\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		return buildResult{err: err}
	}
	out := filepath.Join(binDir, name)
	pkg := "github.com/amnezia-vpn/amneziawg-go"
	for _, args := range [][]string{
		{"get", pkg + "@" + version},
		{"build", "-ldflags", "-X " + pkg + "/ipc.socketDirectory=/var/run/wireguard", "-o", out, pkg},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		if b, err := cmd.CombinedOutput(); err != nil {
			return buildResult{err: fmt.Errorf("go %v: %w\n%s", args, err, b)}
		}
	}
	return buildResult{path: out}
}

func amneziaWG(t testing.TB) impl {
	return impl{name: "amneziawg-go", bin: binPath(t, binAmneziaWG)}
}

// amneziaWG2 is amneziawg-go at amneziaWG2Version. The module proxy may
// stop serving it, or a newer Go may not build it: the test then skips,
// saying why, as the brief for this interop asks (it is not fips-go's
// build).
func amneziaWG2(t testing.TB) impl {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	r, ok := buildDone[binAmneziaWG2]
	if !ok {
		r = buildAmneziaWG(amneziaWG2Version, binAmneziaWG2)
		buildDone[binAmneziaWG2] = r
	}
	if r.err != nil {
		t.Skipf("amneziawg-go %s does not build here: %v", amneziaWG2Version, r.err)
	}
	return impl{name: "amneziawg-go " + amneziaWG2Version, bin: r.path}
}

// TestInteropAmneziaWG: fips-go against amneziawg-go, both obfuscated with
// the same parameters, each side initiating: pings and TCP both ways. The
// obfuscation is set with fips-go's own `set` (wg does not know the keys)
// on both daemons, so amneziawg-go reads fips-go's client too.
func TestInteropAmneziaWG(t *testing.T) {
	requireRoot(t)
	interopAmneziaWG(t, amneziaWG(t), awgArgs)
}

// TestInteropAmneziaWG2: the same against amneziawg-go v0.2.19 with
// AmneziaWG 2.0's parameters (S3, S4, type ranges, signature packets).
func TestInteropAmneziaWG2(t *testing.T) {
	requireRoot(t)
	interopAmneziaWG(t, amneziaWG2(t), awg2Args)
}

// awg3Args add amneziawg-go 3.x's header protection to awg2Args (every S
// at least 12 bytes, the keystream's nonce), its key in a file as
// `awg set` takes it.
func awg3Args(t *testing.T) []string {
	key := filepath.Join(t.TempDir(), "hp.key")
	if err := os.WriteFile(key, []byte("Dx4tPEtaaXiHlqW0w9Lh8AERIjNEVWZ3iJmqu8zd7v8=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return append(slices.Clone(awg2Args), "s4", "16", "header-protection-key", key)
}

// TestInteropAmneziaWG3: the same against amneziawg-go 3.x built from its
// source (not on the module proxy under its v1 path): with AmneziaWG 2.0's
// parameters and 3.x's own keys unset (3.x then speaks 2.0), and with its
// header protection. It runs when $FIPS_AWG_GO_BIN names that binary and
// skips otherwise.
func TestInteropAmneziaWG3(t *testing.T) {
	requireRoot(t)
	bin := os.Getenv("FIPS_AWG_GO_BIN")
	if bin == "" {
		t.Skip("needs FIPS_AWG_GO_BIN: amneziawg-go 3.x built from github.com/amnezia-vpn/amneziawg-go with " +
			"go build -ldflags '-X github.com/amnezia-vpn/amneziawg-go/v3/ipc.socketDirectory=/var/run/wireguard'")
	}
	other := impl{name: "amneziawg-go 3.x", bin: bin}
	t.Run("awg2.0", func(t *testing.T) { interopAmneziaWG(t, other, awg2Args) })
	t.Run("header-protection", func(t *testing.T) { interopAmneziaWG(t, other, awg3Args(t)) })
}

func interopAmneziaWG(t *testing.T, other impl, args []string) {
	for _, fipsInitiates := range []bool{true, false} {
		name := "amneziawg-go-initiates"
		if fipsInitiates {
			name = "fips-go-initiates"
		}
		t.Run(name, func(t *testing.T) {
			o := pairOpts{implA: fipsGo(t), implB: other, obfsA: args, obfsB: args,
				onlyAKnows: fipsInitiates, onlyBKnows: !fipsInitiates}
			p := newPair(t, o)
			ini, resp := p.a, p.b
			if !fipsInitiates {
				ini, resp = p.b, p.a
			}
			ini.ns.waitPing(resp.tun4, 20*time.Second)
			if r := ini.ns.ping(resp.tun4, 10, 1200, false, "-i", "0.05"); r.received != 10 {
				t.Fatalf("ping %s: %d of %d replies\n%s", resp.tun4, r.received, r.sent, r.out)
			}
			checkRole(t, p.a, fipsInitiates)
			tcpTransfer(t, ini.ns, resp.ns, svc(resp.tun4, 5001), helperSpec{Bytes: 8 << 20, Seed: 21})
			tcpTransfer(t, resp.ns, ini.ns, svc(ini.tun4, 5002), helperSpec{Bytes: 8 << 20, Seed: 22})
			// amneziawg-go's junk reached fips-go whenever it initiated
			// (junk that looks like transport is dropped by its index).
			if !fipsInitiates {
				c := p.a.counters()
				if n := c["rx_drop_obfuscation"] + c["rx_drop_unknown_index"]; n < 4 {
					t.Errorf("fips-go dropped %d junk datagrams, want at least Jc=4", n)
				}
			}
			// Both report the parameters as configured.
			for _, n := range []*node{p.a, p.b} {
				out := n.fipsctl("show", n.iface)
				for _, want := range []string{"jc: 4", "s1: 52", "h4: " + args[slices.Index(args, "h4")+1]} {
					if !strings.Contains(out, want) {
						t.Errorf("%s show lacks %q:\n%s", n.impl.name, want, out)
					}
				}
			}
		})
	}
}

// routedLink joins a and b through a third namespace that forwards
// between 10.1.0.0/24 (a's side) and 10.2.0.0/24 (b's); the veth it
// returns has a's and b's addresses as its ends.
func routedLink(t testing.TB, a, b *netns) (*veth, *netns) {
	t.Helper()
	r := newNetns(t)
	va := connect(t, a, r, 1, 0)
	vb := connect(t, r, b, 2, 0)
	r.sysctl("net.ipv4.ip_forward", "1")
	r.sysctl("net.ipv6.conf.all.forwarding", "1")
	a.Run("ip", "route", "add", "10.2.0.0/24", "via", va.v4B.String())
	b.Run("ip", "route", "add", "10.1.0.0/24", "via", vb.v4A.String())
	a.Run("ip", "-6", "route", "add", "fd00:2::/64", "via", va.v6B.String())
	b.Run("ip", "-6", "route", "add", "fd00:1::/64", "via", vb.v6A.String())
	return &veth{a: a, b: b, ifA: va.ifA, ifB: vb.ifB, v4A: va.v4A, v4B: vb.v4B, v6A: va.v6A, v6B: vb.v6B, farIf: vb.ifA}, r
}

// censorRule drops what a censor recognises WireGuard by: a UDP datagram
// of 148 payload bytes (an IP packet of 176) whose payload starts 01 00 00 00.
var censorRule = []string{"FORWARD", "-p", "udp", "-m", "length", "--length", "176",
	"-m", "u32", "--u32", "0>>22&0x3C@8=0x01000000", "-j", "DROP"}

// TestCensorDropsPlainNotObfuscated: behind a router that drops WireGuard
// initiations, plain fips-go never gets a session, and obfuscated fips-go
// (both ends) does and carries traffic.
func TestCensorDropsPlainNotObfuscated(t *testing.T) {
	requireRoot(t)
	requireTool(t, "iptables")
	for _, obfuscated := range []bool{false, true} {
		name := "plain"
		o := pairOpts{routed: true, noV6Overlay: true, onlyAKnows: true}
		if obfuscated {
			name = "obfuscated"
			o.obfsA, o.obfsB = awgArgs, awgArgs
		}
		t.Run(name, func(t *testing.T) {
			p := newPair(t, o)
			p.router.Run(append([]string{"iptables", "-A"}, censorRule...)...)
			if obfuscated {
				p.a.ns.waitPing(p.b.tun4, 20*time.Second)
				tcpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5003), helperSpec{Bytes: 4 << 20, Seed: 23})
				if n := censorDrops(t, p.router); n != 0 {
					t.Errorf("the censor dropped %d obfuscated datagrams", n)
				}
				return
			}
			// Two initiations (Rekey-Timeout is 5 s) and no session.
			r := p.a.ns.ping(p.b.tun4, 7, 56, false, "-i", "1", "-W", "1")
			if r.received != 0 {
				t.Fatalf("%d pings came back through the censor", r.received)
			}
			if n := censorDrops(t, p.router); n < 2 {
				t.Fatalf("the censor dropped %d initiations, want at least 2", n)
			}
			if c := p.a.counters()["handshakes_completed"]; c != 0 {
				t.Fatalf("%d handshakes completed through the censor", c)
			}
		})
	}
}

// censorDrops is how many packets the censor rule has dropped.
func censorDrops(t testing.TB, r *netns) int {
	t.Helper()
	out := r.Run("iptables", "-L", "FORWARD", "-v", "-n", "-x")
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[2] == "DROP" {
			n, err := strconv.Atoi(f[0])
			if err != nil {
				t.Fatalf("iptables counters: %q", line)
			}
			return n
		}
	}
	t.Fatalf("no censor rule in\n%s", out)
	return 0
}
