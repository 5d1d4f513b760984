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

	"github.com/fips-go/fips-go/internal/testkit/netnstest"
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
	e.peer = startNode(t, pns, fipsGo(t), netnstest.UniqueName("frlP"))
	ck := newKeyPair(t)
	e.peer.fipsctl("set", e.peer.iface, "private-key", e.peer.key.privFile, "listen-port", "51820",
		"peer", ck.pub, "allowed-ips", rlClientTun+"/32")
	pns.Run("ip", "addr", "add", rlPeerTun+"/24", "dev", e.peer.iface)
	pns.Run("ip", "link", "set", "dev", e.peer.iface, "up")
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
		f, err := os.Open("/var/run/netns/" + ns.Name)
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
		netnstest.SkipOrFail(t, "needs /dev/net/tun: %v", err)
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
		netnstest.SkipOrFail(t, "unprivileged user namespaces are disabled (user.max_user_namespaces=0)")
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
// It is closed when t ends.
func (e *rootlessEnv) dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	var c net.Conn
	var err error
	inNetns(t, e.client, func() { c, err = net.DialTimeout("tcp", addr, 10*time.Second) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (e *rootlessEnv) listenUDP(t *testing.T) *net.UDPConn {
	t.Helper()
	var u *net.UDPConn
	var err error
	inNetns(t, e.client, func() { u, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
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

// TestRootlessNetstack drives every netstack mode as nobody: SOCKS5
// CONNECT (by name, through the tunnel's DNS) and UDP ASSOCIATE, the HTTP
// proxy, -L tcp and udp, -R, and the refusals.
func TestRootlessNetstack(t *testing.T) {
	requireTool(t, "curl")
	e := newRootlessEnv(t)
	// A local echo for -R, in the client namespace.
	var rln net.Listener
	var err error
	inNetns(t, e.client, func() { rln, err = net.Listen("tcp", "127.0.0.1:0") })
	if err != nil {
		t.Fatal(err)
	}
	defer rln.Close()
	go func() {
		for {
			c, err := rln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	p := e.startNetstack(5, "--socks5", "127.0.0.1:0", "--http", "127.0.0.1:0", "--max-conns", "4",
		"-L", "127.0.0.1:0="+rlPeerTun+":7", "-L", "udp:127.0.0.1:0="+rlPeerTun+":7",
		"-R", "9000="+rln.Addr().String())
	t.Logf("listening: %v", p.listen)
	defer func() {
		if t.Failed() {
			t.Logf("userspace output:\n%s", p.output())
		}
	}()

	t.Run("socks5-connect-by-name", func(t *testing.T) {
		c := e.dial(t, p.listen["socks5"])
		if rep := socksConnect(t, c, socksDomain("peer.tunnel", 7)); rep != 0 {
			t.Fatalf("reply %d", rep)
		}
		if _, err := echoStream(c, rlSeed+2, rlBlobSize); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("socks5-curl", func(t *testing.T) {
		out, err := e.run(exec.Command("curl", "-sS", "--max-time", "120", "--socks5-hostname", p.listen["socks5"], "http://peer.tunnel/"))
		if err != nil || out != "hello from the peer\n" {
			t.Fatalf("curl --socks5-hostname: %v\n%s", err, out)
		}
	})
	t.Run("socks5-udp", func(t *testing.T) { socksUDP(t, e, p.listen["socks5"]) })
	t.Run("socks5-malformed", func(t *testing.T) {
		c := e.dial(t, p.listen["socks5"])
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "GET / HTTP/1.1\r\n\r\n")
		got, err := io.ReadAll(c)
		if err != nil || len(got) < 2 || got[0] != 5 || got[1] != 1 {
			t.Fatalf("got % x, %v; want a SOCKS failure reply and EOF", got, err)
		}
	})
	t.Run("socks5-too-many", func(t *testing.T) {
		// Earlier subtests' connections are closed; give the server a
		// moment to count them out.
		time.Sleep(200 * time.Millisecond)
		for range 4 {
			c := e.dial(t, p.listen["socks5"])
			if rep := socksConnect(t, c, socksIP(rlPeerTun, 7)); rep != 0 {
				t.Fatalf("reply %d below the limit", rep)
			}
		}
		c := e.dial(t, p.listen["socks5"])
		if rep := socksConnect(t, c, socksIP(rlPeerTun, 7)); rep != 1 {
			t.Fatalf("reply %d over the limit, want 1 (general failure)", rep)
		}
	})
	t.Run("http-proxy", func(t *testing.T) {
		out, err := e.run(exec.Command("sh", "-c", "curl -sS --max-time 120 -x http://"+p.listen["http"]+" http://peer.tunnel/blob | sha256sum"))
		if err != nil || !strings.HasPrefix(out, blobSHA(rlSeed, rlBlobSize)) {
			t.Fatalf("curl -x: %v\n%s", err, out)
		}
		c := e.dial(t, p.listen["http"])
		fmt.Fprintf(c, "CONNECT %s:7 HTTP/1.1\r\nHost: x\r\n\r\n", rlPeerTun)
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		if err != nil || !strings.Contains(line, " 200 ") {
			t.Fatalf("CONNECT: %q %v", line, err)
		}
		br.ReadString('\n')
		io.WriteString(c, "through CONNECT")
		got := make([]byte, len("through CONNECT"))
		if _, err := io.ReadFull(br, got); err != nil || string(got) != "through CONNECT" {
			t.Fatalf("echo through CONNECT: %q %v", got, err)
		}
		bad := e.dial(t, p.listen["http"])
		bad.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(bad, "GET /relative HTTP/1.1\r\nHost: x\r\n\r\n")
		line, _ = bufio.NewReader(bad).ReadString('\n')
		if !strings.Contains(line, " 400 ") {
			t.Fatalf("malformed request: %q, want 400", line)
		}
	})
	t.Run("forward-tcp", func(t *testing.T) {
		if _, err := echoStream(e.dial(t, p.listen["tcp"]), rlSeed+3, rlBlobSize); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("forward-udp", func(t *testing.T) {
		u := e.listenUDP(t)
		fwd, _ := net.ResolveUDPAddr("udp", p.listen["udp"])
		c := &udpTo{u, fwd}
		if err := udpRoundTrip(c, []byte("through -L udp")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("answers-ping", func(t *testing.T) {
		if r := e.peer.ns.ping(netip.MustParseAddr(rlClientTun), 3, 56, false); r.received != 3 {
			t.Fatalf("the peer's pings to the netstack: %d of %d answered\n%s", r.received, r.sent, r.out)
		}
	})
	t.Run("reverse", func(t *testing.T) {
		var c net.Conn
		var err error
		inNetns(t, e.peer.ns, func() { c, err = net.DialTimeout("tcp", rlClientTun+":9000", 10*time.Second) })
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := echoStream(c, rlSeed+4, rlBlobSize); err != nil {
			t.Fatal(err)
		}
	})
}

// udpTo is a UDP socket talking to one address, as a net.Conn for
// udpRoundTrip.
type udpTo struct {
	*net.UDPConn
	to *net.UDPAddr
}

func (u *udpTo) Write(b []byte) (int, error) { return u.WriteToUDP(b, u.to) }
func (u *udpTo) Read(b []byte) (int, error) {
	n, _, err := u.ReadFromUDP(b)
	return n, err
}

func socksIP(ip string, port uint16) []byte {
	a := netip.MustParseAddr(ip).As4()
	return []byte{1, a[0], a[1], a[2], a[3], byte(port >> 8), byte(port)}
}

func socksDomain(name string, port uint16) []byte {
	b := append([]byte{3, byte(len(name))}, name...)
	return append(b, byte(port>>8), byte(port))
}

// socksCmd runs the SOCKS5 greeting and one command with address addr
// (ATYP onwards); it returns the reply code and the bound address.
func socksCmd(t *testing.T, c net.Conn, cmd byte, addr []byte) (byte, netip.AddrPort) {
	t.Helper()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	defer c.SetDeadline(time.Time{})
	c.Write([]byte{5, 1, 0})
	var b [2]byte
	if _, err := io.ReadFull(c, b[:]); err != nil || b[1] != 0 {
		t.Fatalf("greeting: % x %v", b, err)
	}
	c.Write(append([]byte{5, cmd, 0}, addr...))
	var h [10]byte // IPv4 replies only here
	if _, err := io.ReadFull(c, h[:]); err != nil {
		t.Fatalf("reply: %v", err)
	}
	return h[1], netip.AddrPortFrom(netip.AddrFrom4([4]byte(h[4:8])), uint16(h[8])<<8|uint16(h[9]))
}

func socksConnect(t *testing.T, c net.Conn, addr []byte) byte {
	rep, _ := socksCmd(t, c, 1, addr)
	return rep
}

// socksUDP checks UDP ASSOCIATE: a round trip through the peer's UDP echo,
// and that a datagram from another socket is not relayed (its echo would
// come back to the client).
func socksUDP(t *testing.T, e *rootlessEnv, server string) {
	ctl := e.dial(t, server)
	rep, relay := socksCmd(t, ctl, 3, socksIP("0.0.0.0", 0))
	if rep != 0 || !relay.Addr().IsLoopback() {
		t.Fatalf("UDP ASSOCIATE: reply %d, relay %v (want one on loopback)", rep, relay)
	}
	u := e.listenUDP(t)
	other := e.listenUDP(t)
	hdr := append([]byte{0, 0, 0}, socksIP(rlPeerTun, 7)...)
	to := net.UDPAddrFromAddrPort(relay)
	c := &udpTo{u, to}
	if err := udpRoundTripSOCKS(c, hdr, "mine"); err != nil {
		t.Fatal(err)
	}
	other.WriteToUDP(append(append([]byte(nil), hdr...), "foreign"...), to)
	if err := udpRoundTripSOCKS(c, hdr, "mine again"); err != nil {
		t.Fatal(err)
	}
	// Anything that arrives now would be the foreign datagram's echo.
	u.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	b := make([]byte, 2048)
	if n, _, err := u.ReadFromUDP(b); err == nil {
		t.Fatalf("a datagram from another socket was relayed: % x", b[:n])
	}
}

func udpRoundTripSOCKS(c *udpTo, hdr []byte, msg string) error {
	b := make([]byte, 2048)
	for range 10 {
		c.Write(append(append([]byte(nil), hdr...), msg...))
		c.SetReadDeadline(time.Now().Add(time.Second))
		n, err := c.Read(b)
		if err != nil {
			continue
		}
		if n < len(hdr) || !bytes.Equal(b[:len(hdr)], hdr) || string(b[len(hdr):n]) != msg {
			if strings.Contains(string(b[:n]), "foreign") {
				return fmt.Errorf("the foreign datagram's echo came back")
			}
			continue // an earlier try's echo
		}
		return nil
	}
	return fmt.Errorf("no UDP echo through SOCKS5 in 10 tries")
}

// Where user namespaces are off, -- CMD names the sysctl and suggests the
// netstack modes. The limit is set to 0 inside a user namespace of the
// test's own, which leaves the machine's setting alone.
func TestRootlessCommandNoUserns(t *testing.T) {
	requireTool(t, "unshare")
	e := newRootlessEnv(t)
	requireUserns(t)
	cmd := exec.Command("unshare", "-U", "--map-root-user", "sh", "-c",
		`echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" userspace -c "$1" -- true`, e.bin, e.conf)
	out, err := e.run(cmd)
	for _, want := range []string{"user.max_user_namespaces is 0", "--socks5"} {
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("got %v:\n%s\nwant a failure mentioning %q", err, out, want)
		}
	}
}

// A signal to fips-go reaches the command, and the command's status is
// fips-go's.
func TestRootlessCommandSignal(t *testing.T) {
	e := newRootlessEnv(t)
	requireUserns(t)
	devTunForEveryone(t)
	cmd := e.nobody("userspace", "-c", e.conf, "--", "sh", "-c", `trap 'exit 42' TERM; echo started; while :; do sleep 0.1; done`)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	var err error
	inNetns(t, e.client, func() { err = cmd.Start() })
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	eventually(t, 20*time.Second, "the command started", func() bool { return strings.Contains(out.String(), "started") })
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("no exit within 20 s of SIGTERM")
	}
	var ee *exec.ExitError
	if !errorsAs(err, &ee) || ee.ExitCode() != 42 {
		t.Fatalf("exit %v, want 42 from the command's trap\n%s", err, out.String())
	}
}

// syncBuffer is a bytes.Buffer that a command writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
