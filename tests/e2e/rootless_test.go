package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The rootless modes end to end: fips-go runs as user nobody in a client
// namespace, the peer is fips-go with a kernel TUN in another namespace
// and serves HTTP, TCP and UDP echo, ping and DNS there (helper mode
// "services").

const (
	rlPeerTun   = "10.211.0.1"
	rlClientTun = "10.211.0.2"
	rlBlobSize  = 64 << 20
	rlSeed      = 11
	nobodyID    = 65534
)

type rootlessEnv struct {
	t      *testing.T
	client *netns // where fips-go runs as nobody
	peer   *node
	dir    string // readable by nobody: the binaries and the config
	bin    string // fips-go
	helper string // this test binary
	conf   string
}

func newRootlessEnv(t *testing.T) *rootlessEnv {
	t.Helper()
	requireRoot(t)
	e := &rootlessEnv{t: t}
	e.client = newNetns(t)
	pns := newNetns(t)
	v := connect(t, e.client, pns, 212, 0)
	e.peer = startNode(t, pns, fipsGo(t), uniqueName("frlP"))
	ck := newKeyPair(t)
	e.peer.fipsctl("set", e.peer.iface, "private-key", e.peer.key.privFile, "listen-port", "51820",
		"peer", ck.pub, "allowed-ips", rlClientTun+"/32")
	pns.run("ip", "addr", "add", rlPeerTun+"/24", "dev", e.peer.iface)
	pns.run("ip", "link", "set", "dev", e.peer.iface, "up")
	h := startHelper(t, pns, helperSpec{Mode: "services", Addr: rlPeerTun, Bytes: rlBlobSize, Seed: rlSeed, Timeout: time.Hour})
	select {
	case <-h.ready:
	case <-h.done:
		t.Fatalf("services exited: %s", h.stderr.String())
	case <-time.After(15 * time.Second):
		t.Fatal("services not ready after 15 s")
	}

	dir, err := os.MkdirTemp("", "fips-rootless-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	e.dir = dir
	e.bin = copyExec(t, binPath(t, binFipsGo), filepath.Join(dir, "fips-go"))
	self, _ := os.Executable()
	e.helper = copyExec(t, self, filepath.Join(dir, "e2e-helper"))
	// Exactly what a user writes: wg-quick format, no other flags needed.
	e.conf = filepath.Join(dir, "wg0.conf")
	conf := fmt.Sprintf("[Interface]\nPrivateKey = %s\nAddress = %s/24\nDNS = %s\n\n[Peer]\nPublicKey = %s\nEndpoint = %s:51820\nAllowedIPs = 10.211.0.0/24\n",
		ck.priv, rlClientTun, rlPeerTun, e.peer.key.pub, v.v4B)
	if err := os.WriteFile(e.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

func copyExec(t *testing.T, from, to string) string {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return to
}

// inNetns runs fn on a thread inside ns: sockets fn opens and processes it
// starts live there. The thread goes back to its namespace afterwards
// (it may be the main thread, which ip-netns-pids takes for the process).
func inNetns(t *testing.T, ns *netns, fn func()) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer home.Close()
		f, err := os.Open("/var/run/netns/" + ns.name)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		fn()
		// Unlock only once back home; otherwise the thread dies locked.
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// nobody returns a command that runs as user nobody in the client
// namespace once started with e.start.
func (e *rootlessEnv) nobody(args ...string) *exec.Cmd {
	cmd := exec.Command(e.bin, args...)
	cmd.Dir = e.dir
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + e.dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyID, Gid: nobodyID, Groups: []uint32{}}}
	return cmd
}

// run runs cmd in the client namespace and returns its combined output.
func (e *rootlessEnv) run(cmd *exec.Cmd) (string, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	var err error
	inNetns(e.t, e.client, func() { err = cmd.Start() })
	if err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(4 * time.Minute):
		cmd.Process.Kill()
		err = <-done
		err = fmt.Errorf("timed out: %w", err)
	}
	return out.String(), err
}

// devTunForEveryone gives /dev/net/tun mode 0666, as distributions ship
// it, for the test's duration.
func devTunForEveryone(t *testing.T) {
	fi, err := os.Stat("/dev/net/tun")
	if err != nil {
		skipOrFail(t, "needs /dev/net/tun: %v", err)
	}
	old := fi.Mode().Perm()
	if old&0o006 == 0o006 {
		return
	}
	if err := os.Chmod("/dev/net/tun", 0o666); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod("/dev/net/tun", old) })
}

func requireUserns(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/user/max_user_namespaces")
	if err == nil && strings.TrimSpace(string(b)) == "0" {
		skipOrFail(t, "unprivileged user namespaces are disabled (user.max_user_namespaces=0)")
	}
}

// TestRootlessCommand runs programs through `userspace -c wg0.conf --
// CMD` as nobody: curl of 64 MiB by name (DNS from the config), ping,
// TCP and UDP echo, and the command's exit status.
func TestRootlessCommand(t *testing.T) {
	requireTool(t, "curl", "sha256sum", "ping", "getent")
	e := newRootlessEnv(t)
	requireUserns(t)
	devTunForEveryone(t)
	spec, _ := json.Marshal(helperSpec{Mode: "echo-check", Addr: rlPeerTun + ":7", Bytes: rlBlobSize, Seed: rlSeed + 1})
	script := fmt.Sprintf(`set -e
id -u
getent hosts peer.tunnel
curl -sS --max-time 120 http://peer.tunnel/blob | sha256sum
ping -n -c 2 -W 2 %s
%s=%s %s
exit 7`, rlPeerTun, helperEnv, shellQuote(string(spec)), e.helper)
	out, err := e.run(e.nobody("userspace", "-c", e.conf, "--", "sh", "-c", script))
	t.Logf("output:\n%s", out)
	var ee *exec.ExitError
	if !errorsAs(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("exit %v, want the command's status 7", err)
	}
	for _, want := range []string{
		fmt.Sprintf("%d\n", nobodyID),       // the command runs as the caller
		"peer.tunnel\n",                     // the tunnel's DNS, via resolv.conf (getent prints the address first)
		blobSHA(rlSeed, rlBlobSize) + "  -", // 64 MiB byte-exact
		"2 packets transmitted, 2 received", // ping
		`"bytes":67108864,"sha256":"`,       // 64 MiB echo
		`"datagrams":1`,                     // UDP round trip
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// The tunnel's DNS, via the bind-mounted resolv.conf.
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(rlPeerTun) + `\s+peer\.tunnel$`).MatchString(out) {
		t.Errorf("getent did not resolve peer.tunnel to %s", rlPeerTun)
	}
}

// Without a usable /dev/net/tun the error says what to do.
func TestRootlessCommandNoTUN(t *testing.T) {
	e := newRootlessEnv(t)
	requireUserns(t)
	fi, err := os.Stat("/dev/net/tun")
	if err != nil || fi.Mode().Perm()&0o006 != 0 {
		t.Skip("/dev/net/tun is open to everyone here")
	}
	out, err := e.run(e.nobody("userspace", "-c", e.conf, "--", "true"))
	if err == nil || !strings.Contains(out, "chmod 0666 /dev/net/tun") {
		t.Fatalf("got %v:\n%s\nwant a failure that explains the device's mode", err, out)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func errorsAs(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*ee = e
	}
	return ok
}

// netstackProc is `fips-go userspace` in a netstack mode, running as
// nobody, with the addresses it announced.
type netstackProc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	listen map[string]string // "socks5", "http", "tcp", "udp", "reverse" -> address
}

var announce = regexp.MustCompile(`^fips-go: (SOCKS5 proxy|HTTP proxy|forwarding tcp|forwarding udp) .*?(\S+:\d+)`)

// startNetstack starts the mode and waits until it announced want
// listeners.
func (e *rootlessEnv) startNetstack(want int, args ...string) *netstackProc {
	e.t.Helper()
	p := &netstackProc{listen: map[string]string{}}
	p.cmd = e.nobody(append([]string{"userspace", "-c", e.conf, "--socket-dir", "none"}, args...)...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	inNetns(e.t, e.client, func() { err = p.cmd.Start() })
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { p.cmd.Process.Signal(syscall.SIGTERM); p.cmd.Wait() })
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			lines <- sc.Text()
		}
		close(lines)
	}()
	for len(p.listen) < want {
		select {
		case l, ok := <-lines:
			if !ok {
				e.t.Fatalf("userspace exited:\n%s", p.output())
			}
			m := announce.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			key := map[string]string{"SOCKS5 proxy": "socks5", "HTTP proxy": "http", "forwarding tcp": "tcp", "forwarding udp": "udp"}[m[1]]
			if strings.Contains(l, "in the tunnel") {
				key = "reverse"
			}
			p.listen[key] = m[2]
		case <-time.After(20 * time.Second):
			e.t.Fatalf("userspace announced %v only:\n%s", p.listen, p.output())
		}
	}
	go func() {
		for range lines {
		}
	}()
	return p
}

func (p *netstackProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// dial opens a TCP connection from the client namespace.
func (e *rootlessEnv) dial(addr string) net.Conn {
	e.t.Helper()
	var c net.Conn
	var err error
	inNetns(e.t, e.client, func() { c, err = net.DialTimeout("tcp", addr, 10*time.Second) })
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

func (e *rootlessEnv) listenUDP() *net.UDPConn {
	e.t.Helper()
	var u *net.UDPConn
	var err error
	inNetns(e.t, e.client, func() { u, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}) })
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { u.Close() })
	return u
}

// Ping through the netstack, as nobody.
func TestRootlessPing(t *testing.T) {
	e := newRootlessEnv(t)
	out, err := e.run(e.nobody("userspace", "-c", e.conf, "--socket-dir", "none", "--ping", rlPeerTun, "--count", "3"))
	t.Logf("%s", out)
	if err != nil || !strings.Contains(out, "seq=3 time=") {
		t.Fatalf("ping: %v", err)
	}
}

var _ = io.EOF
var _ = netip.Addr{}
