//go:build linux

package storm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
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

// The test bed: two namespaces joined by a veth.
//
//	simulator 192.168.97.1 ──── 192.168.97.2:51820 gateway
//	sources   10.99.0.0/16      tunnel 100.127.255.254/10, peers 100.64.0.1...
//
// The gateway routes the source prefix to the simulator, where it is local,
// so every reply reaches the simulator's sockets.
const (
	gatewayOuter = "192.168.97.2"
	simOuter     = "192.168.97.1"
	gatewayPort  = 51820
	sources      = "10.99.0.0/16"
	gatewayInner = "100.127.255.254/10"
	userHZ       = 100 // /proc/PID/stat clock ticks per second on Linux
)

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		netnstest.SkipOrFail(t, "needs root (network namespaces, TUN devices)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		netnstest.SkipOrFail(t, "needs /dev/net/tun: %v", err)
	}
	for _, n := range []string{"ip", "wg"} {
		if _, err := exec.LookPath(n); err != nil {
			netnstest.SkipOrFail(t, "needs %s in PATH (bash scripts/deps.sh installs it)", n)
		}
	}
}

// impl is a gateway implementation under test.
type impl struct{ name, bin string }

// build compiles pkg (a path or module package) into dir as out, static
// as every implementation is built for the benchmarks.
func build(t testing.TB, dir, out string, pkg string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, out)
	cmd := exec.Command("go", "build", "-o", p, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return p
}

// fipsGo is FIPS_GO_BIN, or fips-go built from this tree.
func fipsGo(t testing.TB, dir string) impl {
	if b := os.Getenv("FIPS_GO_BIN"); b != "" {
		abs, err := filepath.Abs(b)
		if err != nil {
			t.Fatal(err)
		}
		return impl{"fips-go", abs}
	}
	return impl{"fips-go", build(t, dir, "fips-go", ".")}
}

type testbed struct {
	t          testing.TB
	im         impl
	nsG, nsS   *netnstest.NS
	iface      string
	cmd        *exec.Cmd
	done       chan struct{}
	peersim    string
	configured int
	seed       uint64
}

// newTestbed starts im in a fresh gateway namespace with configured peers
// (from peersim conf) and the tunnel address up.
func newTestbed(t testing.TB, im impl, peersim string, configured int, seed uint64) *testbed {
	t.Helper()
	b := &testbed{t: t, im: im, peersim: peersim, configured: configured, seed: seed, done: make(chan struct{})}
	b.nsG, b.nsS = netnstest.New(t, "stG"), netnstest.New(t, "stS")
	vg, vs := netnstest.UniqueName("stvg"), netnstest.UniqueName("stvs")
	if out, err := exec.Command("ip", "link", "add", vg, "netns", b.nsG.Name, "type", "veth",
		"peer", "name", vs, "netns", b.nsS.Name).CombinedOutput(); err != nil {
		t.Fatalf("creating veth: %v\n%s", err, out)
	}
	b.nsG.Run("ip", "addr", "add", gatewayOuter+"/24", "dev", vg)
	b.nsS.Run("ip", "addr", "add", simOuter+"/24", "dev", vs)
	b.nsG.Run("ip", "link", "set", vg, "up")
	b.nsS.Run("ip", "link", "set", vs, "up")
	b.nsG.Run("ip", "route", "add", sources, "via", simOuter)
	b.nsS.Run("ip", "route", "add", "local", sources, "dev", "lo")
	for _, ns := range []*netnstest.NS{b.nsG, b.nsS} {
		ns.Run("sh", "-c", "for f in /proc/sys/net/ipv4/conf/*/rp_filter; do echo 0 > $f; done")
	}
	b.iface = netnstest.UniqueName("stgw")
	b.cmd = b.nsG.Command(context.Background(), im.bin, "-f", b.iface)
	b.cmd.Env = append(os.Environ(), "LOG_LEVEL=error", "WG_PROCESS_FOREGROUND=1")
	b.cmd.Stdout, b.cmd.Stderr = os.Stderr, os.Stderr
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", im.name, err)
	}
	go func() { b.cmd.Wait(); close(b.done) }()
	t.Cleanup(b.stop)
	sock := "/var/run/wireguard/" + b.iface + ".sock"
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if !b.alive() || time.Now().After(end) {
			t.Fatalf("%s on %s: no UAPI socket %s", im.name, b.iface, sock)
		}
	}
	conf := filepath.Join(t.TempDir(), "gw.conf")
	f, err := os.Create(conf)
	if err != nil {
		t.Fatal(err)
	}
	gen := exec.Command(peersim, "conf", "-n", strconv.Itoa(configured),
		"-seed", strconv.FormatUint(seed, 10), "-port", strconv.Itoa(gatewayPort))
	gen.Stdout, gen.Stderr = f, os.Stderr
	err = gen.Run()
	f.Close()
	if err != nil {
		t.Fatalf("peersim conf: %v", err)
	}
	b.nsG.Run("wg", "setconf", b.iface, conf)
	b.nsG.Run("ip", "addr", "add", gatewayInner, "dev", b.iface)
	b.nsG.Run("ip", "link", "set", b.iface, "mtu", "1420", "up")
	return b
}

func (b *testbed) alive() bool {
	select {
	case <-b.done:
		return false
	default:
		return true
	}
}

func (b *testbed) stop() {
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(5 * time.Second):
		b.cmd.Process.Kill()
		<-b.done
	}
}

func (b *testbed) pid() int { return b.cmd.Process.Pid }

// simReport is the part of peersim's JSON report the tests read.
type simReport struct {
	Peers           int     `json:"peers"`
	Established     int     `json:"established"`
	Done            int     `json:"done"`
	T50             float64 `json:"t50_s"`
	T99             float64 `json:"t99_s"`
	T100            float64 `json:"t100_s"`
	RunSeconds      float64 `json:"run_s"`
	LatencyP50ms    float64 `json:"hs_latency_p50_ms"`
	LatencyP99ms    float64 `json:"hs_latency_p99_ms"`
	LatencyMaxms    float64 `json:"hs_latency_max_ms"`
	Initiations     uint64  `json:"initiations"`
	Retries         uint64  `json:"retries"`
	CookieReplies   uint64  `json:"cookie_replies"`
	PeersWithCookie int     `json:"peers_with_cookie"`
	PingsSent       uint64  `json:"pings_sent"`
	Replies         uint64  `json:"ping_replies"`
	LossPct         float64 `json:"loss_pct"`
	GoodputMbps     float64 `json:"goodput_mbps"`
	PeerMinK        float64 `json:"peer_goodput_min_kbps"`
	PeerP10K        float64 `json:"peer_goodput_p10_kbps"`
	PeerMedK        float64 `json:"peer_goodput_median_kbps"`
	RTTP50ms        float64 `json:"rtt_p50_ms"`
	RTTP99ms        float64 `json:"rtt_p99_ms"`
	BadPackets      uint64  `json:"bad_packets"`
	SendErrors      uint64  `json:"send_errors"`
	NoReply         int     `json:"peers_without_reply"`
	GatewayInits    uint64  `json:"gateway_initiations"`
}

// runSim runs peersim in the simulator's namespace with args after the
// common ones, and returns its report with the gateway's CPU seconds over
// the run. With -linger, onDone runs when peersim says it is done.
func (b *testbed) runSim(n int, onDone func(), args ...string) (simReport, float64) {
	b.t.Helper()
	all := append([]string{b.peersim, "run", "-n", strconv.Itoa(n),
		"-seed", strconv.FormatUint(b.seed, 10),
		"-gateway", fmt.Sprintf("%s:%d", gatewayOuter, gatewayPort), "-src", sources}, args...)
	cmd := b.nsS.Command(context.Background(), all...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.t.Fatal(err)
	}
	c0 := netnstest.CPUTicks(b.pid())
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	var cpu float64
	var last []byte
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if sc.Text() == "done" {
			cpu = float64(netnstest.CPUTicks(b.pid())-c0) / userHZ
			if onDone != nil {
				onDone()
			}
			continue
		}
		last = append(last[:0], sc.Bytes()...)
	}
	err = cmd.Wait()
	if cpu == 0 {
		cpu = float64(netnstest.CPUTicks(b.pid())-c0) / userHZ
	}
	if err != nil {
		b.t.Fatalf("peersim: %v\n%s", err, last)
	}
	var r simReport
	if err := json.Unmarshal(last, &r); err != nil {
		b.t.Fatalf("peersim report: %v\n%s", err, last)
	}
	if !b.alive() {
		b.t.Fatalf("%s exited during the run", b.im.name)
	}
	return r, cpu
}

// handshakes counts the gateway's peers with a handshake, by wg.
func (b *testbed) handshakes() int {
	out := b.nsG.Run("wg", "show", b.iface, "latest-handshakes")
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[1] != "0" {
			n++
		}
	}
	return n
}
