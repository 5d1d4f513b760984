package e2e

import (
	"bufio"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/testkit/netnstest"
)

// impl is one WireGuard implementation under test: a binary honouring the
// wireguard-go CLI contract, plus environment for its daemon.
type impl struct {
	name string
	bin  string
	env  []string
	args []string // before the interface name
}

func fipsGo(t testing.TB) impl {
	return impl{name: "fips-go", bin: binPath(t, binFipsGo)}
}

func wireguardGo(t testing.TB) impl {
	return impl{name: "wireguard-go", bin: binPath(t, binWireguardGo)}
}

// boringtun is Cloudflare's userspace WireGuard in Rust, the one
// implementation here not written in Go (boringtun-cli at the version
// scripts/deps-boringtun.sh pins, which it builds with cargo into bin/). It runs as
// root (--disable-drop-privileges), as the tests' other daemons do.
func boringtun(t testing.TB) impl {
	t.Helper()
	bin, err := filepath.Abs("../../bin/boringtun-cli")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		netnstest.SkipOrFail(t, "needs bin/boringtun-cli (bash scripts/deps-boringtun.sh builds it with cargo): %v", err)
	}
	return impl{name: "boringtun", bin: bin, args: []string{"--disable-drop-privileges"}}
}

// fipsGoTimers is fips-go built with -tags fipsgo_testtimers, with env such
// as FIPS_GO_TEST_REKEY_AFTER_TIME=3s.
func fipsGoTimers(t testing.TB, env ...string) impl {
	return impl{name: "fips-go(testtimers)", bin: binPath(t, binFipsGoTimers), env: env}
}

// keyPair is a WireGuard key pair in base64, and the private key in a file
// for wg(8), which reads keys only from files.
type keyPair struct {
	priv, pub string
	privFile  string
}

func newKeyPair(t testing.TB) keyPair {
	t.Helper()
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kp := keyPair{
		priv: base64.StdEncoding.EncodeToString(k.Bytes()),
		pub:  base64.StdEncoding.EncodeToString(k.PublicKey().Bytes()),
	}
	kp.privFile = writeTemp(t, "key", kp.priv+"\n")
	return kp
}

// writeTemp writes content to a new file in the test's temporary directory.
func writeTemp(t testing.TB, name, content string) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if err := f.Chmod(0o600); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// node is one running WireGuard interface in a namespace.
type node struct {
	t       testing.TB
	ns      *netns
	impl    impl
	iface   string
	key     keyPair
	port    int
	tun4    netip.Addr // overlay addresses, /24 and /64
	tun6    netip.Addr
	pid     int
	logPath string
}

// startNode runs `IMPL IFACE` inside ns as wg-quick would (daemonizing) and
// requires that it exits 0 with the daemon up and answering.
func startNode(t testing.TB, ns *netns, im impl, iface string) *node {
	t.Helper()
	n := &node{t: t, ns: ns, impl: im, iface: iface, key: newKeyPair(t)}
	n.logPath = filepath.Join(t.TempDir(), iface+".log")
	t.Cleanup(n.stop)
	n.launch()
	return n
}

// launch starts the daemon, logging verbosely to n.logPath. The log is a
// file, not a pipe, so the exiting parent does not leave us waiting on the
// daemon's copy of the descriptor.
func (n *node) launch() {
	n.t.Helper()
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		n.t.Fatal(err)
	}
	defer logf.Close()
	args := []string{"netns", "exec", n.ns.Name, "env", "LOG_LEVEL=verbose"}
	args = append(append(args, n.impl.env...), n.impl.bin)
	args = append(append(args, n.impl.args...), n.iface)
	cmd := exec.Command("ip", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Run(); err != nil {
		n.t.Fatalf("%s %s: %v (want exit 0)\n%s", n.impl.name, n.iface, err, n.logTail())
	}
	// fips-go's parent exits only once its daemon answers; wireguard-go's
	// exits as soon as it has started the daemon, so give that a moment.
	for end := time.Now().Add(3 * time.Second); n.pid == 0 && time.Now().Before(end); {
		if n.pid = findDaemon(n.impl.bin, n.iface); n.pid == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if n.pid == 0 {
		n.t.Fatalf("%s %s exited 0 but no daemon is running\n%s", n.impl.name, n.iface, n.logTail())
	}
	// fips-go promises an answering daemon when the command returns; for
	// wireguard-go, wait for its daemon to take over the socket.
	err = uapiGet(n.socketPath())
	for end := time.Now().Add(10 * time.Second); err != nil && !n.isFipsGo() && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
		err = uapiGet(n.socketPath())
	}
	if err != nil {
		n.t.Fatalf("%s %s exited 0 but its UAPI socket does not answer: %v\n%s", n.impl.name, n.iface, err, n.logTail())
	}
}

func (n *node) isFipsGo() bool { return strings.HasPrefix(n.impl.name, "fips-go") }

// uapiGet sends a UAPI get request to the socket and checks for errno=0.
func uapiGet(path string) error {
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("get=1\n\n")); err != nil {
		return err
	}
	// The answer ends with an empty line; the server keeps the connection
	// open for further requests.
	r := bufio.NewReader(c)
	var last string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("reading the get=1 answer: %w", err)
		}
		if line == "\n" {
			break
		}
		last = line
	}
	if last != "errno=0\n" {
		return fmt.Errorf("get=1 answered %q", last)
	}
	return nil
}

func (n *node) socketPath() string { return "/var/run/wireguard/" + n.iface + ".sock" }

// findDaemon returns the pid of the process running bin for iface, or 0.
// A fips-go daemon whose privileges are separated is two such processes,
// a root monitor and its worker; the worker, which handles the packets,
// is the one returned.
func findDaemon(bin, iface string) int {
	ents, _ := os.ReadDir("/proc")
	found := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil || exe != bin {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(args) == 0 || args[len(args)-1] != iface {
			continue
		}
		if found == 0 || procUID(pid) != 0 {
			found = pid
		}
	}
	return found
}

// procUID is the real uid of pid (-1 if it cannot be read).
func procUID(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				if uid, err := strconv.Atoi(f[0]); err == nil {
					return uid
				}
			}
		}
	}
	return -1
}

// alive reports whether the daemon process still exists (and is not a
// zombie, which it cannot be: it is reparented to init, which reaps it).
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state field follows the parenthesised command name.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// stop ends the daemon (SIGTERM, then SIGKILL), removes a leftover socket,
// and on failure shows the end of the daemon's log.
func (n *node) stop() {
	if n.pid != 0 && processAlive(n.pid) {
		syscall.Kill(n.pid, syscall.SIGTERM)
		end := time.Now().Add(5 * time.Second)
		for processAlive(n.pid) && time.Now().Before(end) {
			time.Sleep(20 * time.Millisecond)
		}
		if processAlive(n.pid) {
			n.t.Errorf("%s %s did not exit within 5 s of SIGTERM; killing it", n.impl.name, n.iface)
			syscall.Kill(n.pid, syscall.SIGKILL)
		}
	}
	os.Remove(n.socketPath())
	// fips-go remembers its peers beside the socket (device/resume.go); a
	// later test whose interface gets the same name must not find them.
	os.Remove(strings.TrimSuffix(n.socketPath(), ".sock") + ".state")
	if n.t.Failed() {
		n.t.Logf("log of %s %s (%s):\n%s", n.impl.name, n.iface, n.ns.Name, n.logTail())
	}
}

func (n *node) logTail() string {
	b, _ := os.ReadFile(n.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 60 {
		lines = lines[len(lines)-60:]
	}
	return strings.Join(lines, "\n")
}

// peerOpts are the settings one node holds for another.
type peerOpts struct {
	endpoint  netip.AddrPort // invalid: none, learn it from the peer
	keepalive int
	psk       string // file with a preshared key, or ""
}

// setArgs are wg-set arguments (shared by `wg set` and `fips-go set`) that
// give n its key and port and add peer p with p's overlay addresses.
func (n *node) setArgs(p *node, o peerOpts) []string {
	args := []string{"private-key", n.key.privFile, "listen-port", strconv.Itoa(n.port),
		"peer", p.key.pub, "allowed-ips", p.allowedIPs()}
	if o.endpoint.IsValid() {
		args = append(args, "endpoint", o.endpoint.String())
	}
	if o.keepalive > 0 {
		args = append(args, "persistent-keepalive", strconv.Itoa(o.keepalive))
	}
	if o.psk != "" {
		args = append(args, "preshared-key", o.psk)
	}
	return args
}

func (n *node) allowedIPs() string {
	var s []string
	if n.tun4.IsValid() {
		s = append(s, n.tun4.String()+"/32")
	}
	if n.tun6.IsValid() {
		s = append(s, n.tun6.String()+"/128")
	}
	return strings.Join(s, ",")
}

// configure sets n up to talk to p, with the stock wg tool or with fips-go's
// built-in client (tool "wg" or "fips-go").
func (n *node) configure(tool string, p *node, o peerOpts) {
	n.t.Helper()
	switch tool {
	case "wg":
		n.wg(append([]string{"set", n.iface}, n.setArgs(p, o)...)...)
	case "fips-go":
		n.fipsctl(append([]string{"set", n.iface}, n.setArgs(p, o)...)...)
	default:
		n.t.Fatalf("unknown configuration tool %q", tool)
	}
}

// wg runs the stock wg(8) inside n's namespace.
func (n *node) wg(args ...string) string {
	n.t.Helper()
	return n.ns.Run(append([]string{"wg"}, args...)...)
}

// fipsctl runs fips-go's built-in client inside n's namespace.
func (n *node) fipsctl(args ...string) string {
	n.t.Helper()
	return n.ns.Run(append([]string{binPath(n.t, binFipsGo)}, args...)...)
}

// up gives the interface its overlay addresses and MTU (0: leave it) and
// brings it up.
func (n *node) up(mtu int) {
	n.t.Helper()
	if mtu > 0 {
		n.ns.Run("ip", "link", "set", "dev", n.iface, "mtu", strconv.Itoa(mtu))
	}
	if n.tun4.IsValid() {
		n.ns.Run("ip", "addr", "add", n.tun4.String()+"/24", "dev", n.iface)
	}
	if n.tun6.IsValid() {
		n.ns.Run("ip", "addr", "add", n.tun6.String()+"/64", "dev", n.iface, "nodad")
	} else {
		// No IPv6 overlay: keep the kernel's own IPv6 packets (router
		// solicitations, MLD) off the tunnel, so counters stay exact.
		n.ns.sysctl("net.ipv6.conf."+n.iface+".disable_ipv6", "1")
	}
	n.ns.Run("ip", "link", "set", "dev", n.iface, "up")
}

// counters returns fips-go's own counters from `fips-go show IFACE`.
func (n *node) counters() map[string]uint64 {
	n.t.Helper()
	out := n.fipsctl("show", n.iface)
	m := map[string]uint64{}
	in := false
	for _, line := range strings.Split(out, "\n") {
		if line == "counters:" {
			in = true
			continue
		}
		if !in {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if u, err := strconv.ParseUint(v, 10, 64); ok && err == nil {
			m[k] = u
		}
	}
	if len(m) == 0 {
		n.t.Fatalf("no counters in `fips-go show %s`:\n%s", n.iface, out)
	}
	return m
}
