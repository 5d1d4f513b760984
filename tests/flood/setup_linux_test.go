//go:build linux

package flood

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/testkit/netnstest"
)

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		netnstest.SkipOrFail(t, "needs root (network namespaces, TUN devices, raw sockets)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		netnstest.SkipOrFail(t, "needs /dev/net/tun: %v", err)
	}
	for _, n := range []string{"ip", "wg", "iperf3", "ping"} {
		if _, err := exec.LookPath(n); err != nil {
			netnstest.SkipOrFail(t, "needs %s in PATH (bash scripts/deps.sh installs it)", n)
		}
	}
}

// impl is one WireGuard implementation under test, as the victim and,
// unless initiator is set, as the initiator too.
type impl struct {
	name, bin string
	initiator *impl // another implementation on the initiator's side
}

// initiatorImpl is what runs on the initiator's side.
func (im impl) initiatorImpl() impl {
	if im.initiator != nil {
		return *im.initiator
	}
	return im
}

// buildImpls returns fips-go (FIPS_GO_BIN or built from this tree),
// wireguard-go built from the version go.mod pins, Tailscale's fork
// when bin/wireguard-go-ts (or FIPS_FLOOD_TS_BIN) exists, and fips-go as
// the victim of a wireguard-go initiator. FIPS_FLOOD_ONLY, a
// comma-separated list of those names, keeps only the rows it names.
func buildImpls(t testing.TB, all bool) []impl {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	build := func(out string, args ...string) string {
		p := filepath.Join(dir, out)
		cmd := exec.Command("go", append([]string{"build", "-o", p}, args...)...)
		cmd.Dir = root
		// Static, as the README and bench-netns.sh build every
		// implementation, so the RSS columns compare like with like.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %v: %v\n%s", args, err, b)
		}
		return p
	}
	fips := os.Getenv("FIPS_GO_BIN")
	if fips == "" {
		fips = build("fips-go", ".")
	} else if fips, err = filepath.Abs(fips); err != nil {
		t.Fatal(err)
	}
	impls := []impl{{name: "fips-go", bin: fips}}
	if !all {
		return impls
	}
	// FIPS_FLOOD_ONLY keeps only the rows it names; nothing is built for
	// the others.
	only := os.Getenv("FIPS_FLOOD_ONLY")
	wanted := func(name string) bool {
		return only == "" || slices.Contains(strings.Split(only, ","), name)
	}
	const initiatorRow = "fips-go victim; wireguard-go initiator"
	var wg impl
	if wanted("wireguard-go") || wanted(initiatorRow) {
		wg = impl{name: "wireguard-go", bin: build("wireguard-go", "golang.zx2c4.com/wireguard")}
		impls = append(impls, wg)
	}
	ts := os.Getenv("FIPS_FLOOD_TS_BIN")
	if ts == "" {
		ts = filepath.Join(root, "bin", "wireguard-go-ts")
	}
	if _, err := os.Stat(ts); err == nil {
		impls = append(impls, impl{name: "wireguard-go-ts", bin: ts})
	} else if wanted("wireguard-go-ts") {
		t.Logf("no Tailscale fork at %s: measuring without it", ts)
	}
	// The second handshake target: wireguard-go initiating to a
	// fips-go victim, which must complete within Rekey-Timeout plus 1 s
	// (wireguard-go waits out Rekey-Timeout after a cookie reply).
	if wanted(initiatorRow) {
		impls = append(impls, impl{name: initiatorRow, bin: fips, initiator: &wg})
	}
	var kept []impl
	for _, im := range impls {
		if wanted(im.name) {
			kept = append(kept, im)
		}
	}
	return kept
}

// netns is a namespace the test created (see netnstest.NS).
type netns struct{ *netnstest.NS }

func newNetns(t testing.TB, prefix string) *netns { return &netns{netnstest.New(t, prefix)} }

// link joins a and b with a veth pair, addresses a4 and b4 (with prefix
// length), and returns the interface names.
func link(t testing.TB, a, b *netns, a4, b4 string) (ifA, ifB string) {
	t.Helper()
	ifA, ifB = netnstest.UniqueName("flva"), netnstest.UniqueName("flvb")
	out, err := exec.Command("ip", "link", "add", ifA, "netns", a.Name, "type", "veth",
		"peer", "name", ifB, "netns", b.Name).CombinedOutput()
	if err != nil {
		t.Fatalf("creating veth: %v\n%s", err, out)
	}
	a.Run("ip", "addr", "add", a4, "dev", ifA)
	b.Run("ip", "addr", "add", b4, "dev", ifB)
	a.Run("ip", "link", "set", ifA, "up")
	b.Run("ip", "link", "set", ifB, "up")
	return ifA, ifB
}

// keypair is a WireGuard key pair, with the private key in a file for wg.
type keypair struct {
	pub, privFile string
}

func newKeypair(t testing.TB) keypair {
	t.Helper()
	priv, err := noise.GeneratePrivateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(f, []byte(priv.Base64()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return keypair{pub: priv.PublicKey().Base64(), privFile: f}
}

// daemon is one tunnel process, run in the foreground as the test's child
// so its PID is known (ip netns exec execs it in place).
type daemon struct {
	ns    *netns
	iface string
	cmd   *exec.Cmd
	done  chan struct{}
}

func startDaemon(t testing.TB, ns *netns, im impl, prefix string) *daemon {
	t.Helper()
	d := &daemon{ns: ns, iface: netnstest.UniqueName(prefix), done: make(chan struct{})}
	d.cmd = ns.Command(context.Background(), im.bin, "-f", d.iface)
	d.cmd.Env = append(os.Environ(), "LOG_LEVEL=error", "WG_PROCESS_FOREGROUND=1")
	d.cmd.Stdout, d.cmd.Stderr = os.Stderr, os.Stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", im.name, err)
	}
	go func() { d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(5 * time.Second):
			d.cmd.Process.Kill()
			<-d.done
		}
	})
	sock := "/var/run/wireguard/" + d.iface + ".sock"
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			return d
		}
		if !d.alive() || time.Now().After(end) {
			t.Fatalf("%s on %s: no UAPI socket %s", im.name, d.iface, sock)
		}
	}
}

func (d *daemon) alive() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// pid is the process that handles the packets: with fips-go's privilege
// separation the command started is the monitor, and its one child the
// worker.
func (d *daemon) pid() int {
	p := d.cmd.Process.Pid
	// Any of the monitor's threads may have started the worker.
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", p))
	var kids []string
	for _, t := range tasks {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", p, t.Name()))
		kids = append(kids, strings.Fields(string(b))...)
	}
	if len(kids) == 1 {
		if c, err := strconv.Atoi(kids[0]); err == nil {
			return c
		}
	}
	return p
}

// resetPeakRSS starts a new peak (VmHWM) from the current RSS
// (clear_refs 5).
func resetPeakRSS(pid int) {
	os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// machineCPU is the whole machine's time from /proc/stat, in clock ticks
// summed over its CPUs, or (from since) in percent of one CPU.
type machineCPU struct{ softirq, idle float64 }

func readMachineCPU() machineCPU {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineCPU{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq ...
	if len(f) < 8 || f[0] != "cpu" {
		return machineCPU{}
	}
	v := func(i int) float64 { x, _ := strconv.ParseFloat(f[i], 64); return x }
	return machineCPU{softirq: v(7), idle: v(4) + v(5)}
}

// since is the share of one CPU spent since m0, over el seconds.
func (m machineCPU) since(m0 machineCPU, el float64) machineCPU {
	pct := func(d float64) float64 { return d / userHZ / el * 100 }
	return machineCPU{softirq: pct(m.softirq - m0.softirq), idle: pct(m.idle - m0.idle)}
}
