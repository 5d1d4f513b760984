package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/testkit/netnstest"
	"golang.org/x/net/dns/dnsmessage"
)

// The rootless exit end to end: `fips-go userspace -c server.conf --exit`
// runs as nobody in the exit namespace; a client namespace runs a fips-go
// daemon with a kernel TUN (configured by wg) whose AllowedIPs route the
// far namespace's subnet through the tunnel; the far namespace, reachable
// only from the exit's, serves HTTP, TCP echo and UDP echo (helper mode
// "services") and answers ping and DNS: the exit's host resolver.

const (
	exitTun         = "10.217.0.1"
	exitClientTun   = "10.217.0.2"
	exitFar         = "10.216.0.2" // the far namespace's end of the exit's veth
	exitDenied      = "10.216.0.99"
	exitUnreachable = "10.216.0.77"
	exitBlobSize    = 256 << 20
	exitSeed        = 21
	exitMetrics     = "127.0.0.1:9586"
	exitPeerCap     = 8 // TestRootlessExit's --exit-max-flows-per-peer
)

type exitEnv struct {
	t          *testing.T
	client     *netns
	exitNS     *netns
	far        *netns
	pid        int // the exit's: ip netns exec and setpriv exec it in place
	proc       *exitOutput
	clientNode *node
}

// exitOutput is what the exit process wrote.
type exitOutput struct {
	mu  sync.Mutex
	out bytes.Buffer
}

func (p *exitOutput) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// newExitEnv starts the three namespaces and the exit, with extra
// arguments for the exit after the defaults.
func newExitEnv(t *testing.T, client impl, extra ...string) *exitEnv {
	t.Helper()
	requireRoot(t)
	requireTool(t, "wg", "setpriv")
	e := &exitEnv{t: t, client: newNetns(t), exitNS: newNetns(t)}
	far := newNetns(t)
	e.far = far
	under := connect(t, e.client, e.exitNS, 215, 0)
	connect(t, e.exitNS, far, 216, 0)
	// Ping sockets for nobody's group, in the exit's namespace only.
	e.exitNS.sysctl("net.ipv4.ping_group_range", fmt.Sprintf("'%d %d'", nobodyID, nobodyID))

	h := startHelper(t, far, helperSpec{Mode: "services", Addr: exitFar, Bytes: exitBlobSize, Seed: exitSeed, Timeout: time.Hour})
	select {
	case <-h.ready:
	case <-h.done:
		t.Fatalf("services exited: %s", h.stderr.String())
	case <-time.After(15 * time.Second):
		t.Fatal("services not ready after 15 s")
	}

	// The exit: what a user writes, run as nobody.
	ek, ck := newKeyPair(t), newKeyPair(t)
	dir, err := os.MkdirTemp("", "fips-exit-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := copyExec(t, binPath(t, binFipsGo), filepath.Join(dir, "fips-go"))
	conf := filepath.Join(dir, "server.conf")
	body := fmt.Sprintf("[Interface]\nPrivateKey = %s\nAddress = %s/24\nListenPort = 51820\n\n[Peer]\nPublicKey = %s\nAllowedIPs = %s/32\n",
		ek.priv, exitTun, ck.pub, exitClientTun)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	// The exit's host resolver is the far namespace's DNS server: `ip
	// netns exec` mounts /etc/netns/NAME/resolv.conf over the host's.
	etc := filepath.Join("/etc/netns", e.exitNS.Name)
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(etc) })
	if err := os.WriteFile(filepath.Join(etc, "resolv.conf"), []byte("nameserver "+exitFar+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"netns", "exec", e.exitNS.Name,
		"setpriv", fmt.Sprintf("--reuid=%d", nobodyID), fmt.Sprintf("--regid=%d", nobodyID), "--clear-groups",
		bin, "userspace", "-c", conf, "--socket-dir", "none", "--exit",
		"--exit-deny", exitDenied, "--metrics", exitMetrics}, extra...)
	cmd := exec.Command("ip", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + dir}
	e.proc = &exitOutput{}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Start()
	if err != nil {
		t.Fatal(err)
	}
	e.pid = cmd.Process.Pid
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("exit output:\n%s", e.proc.output())
		}
	})
	started := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			e.proc.mu.Lock()
			e.proc.out.WriteString(sc.Text() + "\n")
			e.proc.mu.Unlock()
			if strings.Contains(sc.Text(), "exit: relaying") {
				once.Do(func() { close(started) })
			}
		}
	}()
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatalf("the exit did not start:\n%s", e.proc.output())
	}

	// The client: a daemon with a kernel TUN, configured by wg.
	n := startNode(t, e.client, client, netnstest.UniqueName("fexC"))
	n.wg("set", n.iface, "private-key", ck.privFile,
		"peer", ek.pub, "endpoint", under.v4B.String()+":51820", "allowed-ips", exitTun+"/32,10.216.0.0/24")
	e.client.Run("ip", "addr", "add", exitClientTun+"/24", "dev", n.iface)
	e.client.Run("ip", "link", "set", "dev", n.iface, "up")
	e.client.Run("ip", "route", "add", "10.216.0.0/24", "dev", n.iface)
	e.clientNode = n
	return e
}

// dial connects from the client namespace through the exit.
func (e *exitEnv) dial(t *testing.T, addr string) (net.Conn, error) {
	var c net.Conn
	var err error
	inNetns(t, e.client, func() { c, err = net.DialTimeout("tcp", addr, 20*time.Second) })
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// metrics reads the exit's metrics endpoint (inside its namespace).
func (e *exitEnv) metrics(t *testing.T) string {
	return scrapeIn(t, e.exitNS, exitMetrics)
}

// scrapeIn fetches http://addr/metrics from inside ns.
func scrapeIn(t *testing.T, ns *netns, addr string) string {
	var body []byte
	var err error
	// http.Client dials on another goroutine (another thread, another
	// namespace): dial here and speak HTTP/1.0 by hand.
	var c net.Conn
	inNetns(t, ns, func() { c, err = net.DialTimeout("tcp", addr, 10*time.Second) })
	if err == nil {
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET /metrics HTTP/1.0\r\nHost: fips-go\r\n\r\n")
		var r *http.Response
		if r, err = http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			body, err = io.ReadAll(r.Body)
			r.Body.Close()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

func TestRootlessExit(t *testing.T) {
	e := newExitEnv(t, fipsGo(t), "--exit-max-flows-per-peer", fmt.Sprint(exitPeerCap))

	// First, while the peer has no flow open: its first exitPeerCap flows
	// are relayed, the next is refused with a RST and counted, and a
	// closed flow gives its slot back.
	t.Run("peer-cap", func(t *testing.T) {
		var open []net.Conn
		for i := range exitPeerCap {
			c, err := e.dial(t, exitFar+":7")
			if err != nil {
				t.Fatalf("flow %d of %d: %v", i+1, exitPeerCap, err)
			}
			if _, err := echoStream(c, exitSeed+10, 1<<10); err != nil {
				t.Fatalf("flow %d of %d: %v", i+1, exitPeerCap, err)
			}
			open = append(open, c)
		}
		if _, err := e.dial(t, exitFar+":7"); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("flow %d with a cap of %d: %v, want connection refused", exitPeerCap+1, exitPeerCap, err)
		}
		want := `fipsgo_exit_refused_total{interface="fipsgo0",reason="peer_flow_cap"} 1`
		if m := e.metrics(t); !strings.Contains(m, want) {
			t.Fatalf("metrics lack %s:\n%s", want, m)
		}
		// The slot comes back once the relay has passed both FINs.
		open[0].Close()
		for try := 0; ; try++ {
			c, err := e.dial(t, exitFar+":7")
			if err == nil {
				if _, err := echoStream(c, exitSeed+11, 1<<10); err != nil {
					t.Fatal(err)
				}
				c.Close()
				break
			}
			if !errors.Is(err, syscall.ECONNREFUSED) || try == 100 {
				t.Fatalf("a flow after closing one of %d: %v", exitPeerCap, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, c := range open[1:] {
			c.Close()
		}
		// Free every slot before the next subtests.
		eventually(t, 10*time.Second, "the capped flows closed", func() bool {
			return strings.Contains(e.metrics(t), `fipsgo_exit_flows_open{interface="fipsgo0",protocol="tcp"} 0`)
		})
	})
	t.Run("tcp-echo-both-ways", func(t *testing.T) {
		c, err := e.dial(t, exitFar+":7")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := echoStream(c, exitSeed+1, exitBlobSize); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("http-download", func(t *testing.T) {
		c, err := e.dial(t, exitFar+":80")
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(3 * time.Minute))
		fmt.Fprintf(c, "GET /blob HTTP/1.0\r\nHost: far\r\n\r\n")
		r, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil || n != exitBlobSize || hex.EncodeToString(h.Sum(nil)) != blobSHA(exitSeed, exitBlobSize) {
			t.Fatalf("blob: %d bytes, %v; want %d byte-exact", n, err, exitBlobSize)
		}
	})
	t.Run("half-close", func(t *testing.T) {
		c, err := e.dial(t, exitFar+":7")
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(time.Minute))
		io.WriteString(c, "half-closed but still reading")
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(c)
		if err != nil || string(got) != "half-closed but still reading" {
			t.Fatalf("after CloseWrite read %q, %v", got, err)
		}
	})
	t.Run("udp", func(t *testing.T) {
		var u net.Conn
		var err error
		inNetns(t, e.client, func() { u, err = net.Dial("udp", exitFar+":7") })
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		if err := udpRoundTrip(u, []byte("datagram through the exit")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("udp-port-unreachable", func(t *testing.T) {
		// Nothing listens on UDP port 9 in the far namespace: its ICMP
		// port unreachable reaches the client's socket through the exit.
		var u net.Conn
		var err error
		inNetns(t, e.client, func() { u, err = net.Dial("udp", exitFar+":9") })
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		b := make([]byte, 64)
		for try := 0; ; try++ {
			u.Write([]byte("anyone on port 9?"))
			u.SetReadDeadline(time.Now().Add(time.Second))
			_, err = u.Read(b)
			if errors.Is(err, syscall.ECONNREFUSED) {
				break
			}
			if try == 10 {
				t.Fatalf("read after writing to a closed UDP port: %v, want connection refused", err)
			}
		}
	})
	t.Run("refused-port", func(t *testing.T) {
		_, err := e.dial(t, exitFar+":81")
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial a closed port: %v, want connection refused", err)
		}
	})
	t.Run("denied", func(t *testing.T) {
		_, err := e.dial(t, exitDenied+":80")
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial a denied address: %v, want connection refused", err)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		// No host answers ARP for it on the exit's veth: the exit's
		// connect fails with EHOSTUNREACH after the kernel gives up.
		_, err := e.dial(t, exitUnreachable+":80")
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial an unreachable address: %v, want connection refused (a RST)", err)
		}
	})
	t.Run("ping", func(t *testing.T) {
		if r := e.client.ping(netip.MustParseAddr(exitFar), 2, 56, false, "-W", "5"); r.received != 2 {
			t.Fatalf("ping %s through the exit: %d of 2 replies\n%s", exitFar, r.received, r.out)
		}
	})
	t.Run("dns-by-name", func(t *testing.T) {
		var u net.Conn
		var err error
		inNetns(t, e.client, func() { u, err = net.Dial("udp", exitTun+":53") })
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		a, err := lookupA(u, rootlessName)
		if err != nil || a.String() != exitFar {
			t.Fatalf("%s through the exit's DNS: %v, %v; want %s", rootlessName, a, err, exitFar)
		}
	})
	t.Run("counters", func(t *testing.T) {
		m := e.metrics(t)
		for _, want := range []string{
			`fipsgo_exit_refused_total{interface="fipsgo0",reason="denied"} 1`,
			`fipsgo_exit_refused_total{interface="fipsgo0",reason="connect_refused"} 1`,
			`fipsgo_exit_refused_total{interface="fipsgo0",reason="unreachable"} 1`,
			fmt.Sprintf(`fipsgo_exit_flows_opened_total{interface="fipsgo0",protocol="tcp"} %d`, 3+exitPeerCap+1),
			`fipsgo_exit_flows_opened_total{interface="fipsgo0",protocol="udp"} 3`, // the echo, port 9 and DNS
			`fipsgo_exit_port_unreachables_total{interface="fipsgo0"} 1`,
			`fipsgo_exit_flows_opened_total{interface="fipsgo0",protocol="icmp"} 1`,
		} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %s", want)
			}
		}
		if t.Failed() {
			t.Logf("metrics:\n%s", m)
		}
	})
}

// The same exit with wireguard-go as the client.
func TestRootlessExitWireguardGoClient(t *testing.T) {
	e := newExitEnv(t, wireguardGo(t))
	c, err := e.dial(t, exitFar+":7")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := echoStream(c, exitSeed+2, exitBlobSize); err != nil {
		t.Fatal(err)
	}
	var u net.Conn
	inNetns(t, e.client, func() { u, err = net.Dial("udp", exitFar+":7") })
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if err := udpRoundTrip(u, []byte("datagram from wireguard-go")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.dial(t, exitFar+":81"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial a closed port: %v, want connection refused", err)
	}
	if r := e.client.ping(netip.MustParseAddr(exitFar), 2, 56, false, "-W", "5"); r.received != 2 {
		t.Fatalf("ping %s through the exit from wireguard-go: %d of 2 replies\n%s", exitFar, r.received, r.out)
	}
}

// lookupA asks the DNS server u is connected to for name's A record.
func lookupA(u net.Conn, name string) (netip.Addr, error) {
	q := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 4711, RecursionDesired: true})
	err := q.StartQuestions()
	if err == nil {
		err = q.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	}
	if err != nil {
		return netip.Addr{}, err
	}
	msg, err := q.Finish()
	if err != nil {
		return netip.Addr{}, err
	}
	b := make([]byte, 1500)
	for range 10 {
		u.Write(msg)
		u.SetReadDeadline(time.Now().Add(time.Second))
		n, err := u.Read(b)
		if err != nil {
			continue
		}
		var p dnsmessage.Parser
		if _, err := p.Start(b[:n]); err != nil {
			return netip.Addr{}, err
		}
		if err := p.SkipAllQuestions(); err != nil {
			return netip.Addr{}, err
		}
		for {
			h, err := p.AnswerHeader()
			if err != nil {
				return netip.Addr{}, fmt.Errorf("no A record: %w", err)
			}
			if h.Type != dnsmessage.TypeA {
				p.SkipAnswer()
				continue
			}
			r, err := p.AResource()
			if err != nil {
				return netip.Addr{}, err
			}
			return netip.AddrFrom4(r.A), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("no answer in 10 tries")
}
