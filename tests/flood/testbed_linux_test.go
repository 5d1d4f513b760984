//go:build linux

package flood

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/testkit/netnstest"
)

// The test bed: three namespaces.
//
//	initiator 192.168.98.1 ── 192.168.98.2 victim 192.168.99.2 ── 192.168.99.1 attacker
//	tunnel    10.98.0.1    ←──────────→  10.98.0.2
//
// The attacker forges initiations from 10.99.0.0/16. The victim routes that
// prefix back to the attacker, where it is local, so every reply stays in
// the test and reaches the attacker's socket.
const (
	victimPort    = 51820
	closedPort    = 51999 // nothing listens here: the baseline flood
	attackSrcPort = 40000
	floodSources  = "10.99.0.0/16"
	tunVictim     = "10.98.0.2"
	tunInitiator  = "10.98.0.1"
	undInitiator  = "192.168.98.1"
	undVictimI    = "192.168.98.2"
	undAttacker   = "192.168.99.1"
	undVictimA    = "192.168.99.2"
	userHZ        = 100 // /proc/PID/stat clock ticks per second on Linux
)

type testbed struct {
	t                   testing.TB
	im                  impl
	nsV, nsI, nsA       *netns
	victim, initiator   *daemon
	keyV, keyI          keypair
	victimAttackerIface string
	// handshakes is how many fresh handshakes each row times (the
	// slowest is its figure); attackers how many attacker processes
	// share the flood, each with its own source port and its own core's
	// worth of sending.
	handshakes, attackers int
}

func newTestbed(t testing.TB, im impl) *testbed {
	t.Helper()
	b := &testbed{t: t, im: im, handshakes: 1, attackers: 1}
	b.nsV, b.nsI, b.nsA = newNetns(t, "flV"), newNetns(t, "flI"), newNetns(t, "flA")
	ifI, _ := link(t, b.nsI, b.nsV, undInitiator+"/24", undVictimI+"/24")
	if pcap := os.Getenv("FIPS_FLOOD_PCAP"); pcap != "" {
		// A diagnostic: every handshake message (not transport data) on
		// the initiator's link, to see which of a slow handshake's
		// messages went missing.
		cmd := b.nsI.Command(context.Background(), "tcpdump", "-i", ifI, "-w", pcap, "-U", "-s", "96", "udp and udp[8] != 4")
		if err := cmd.Start(); err != nil {
			t.Fatalf("FIPS_FLOOD_PCAP: %v", err)
		}
		t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	}
	_, b.victimAttackerIface = link(t, b.nsA, b.nsV, undAttacker+"/24", undVictimA+"/24")
	b.nsV.Run("ip", "route", "add", floodSources, "via", undAttacker)
	b.nsA.Run("ip", "route", "add", "local", floodSources, "dev", "lo")
	b.nsV.Run("sh", "-c", "for f in /proc/sys/net/ipv4/conf/*/rp_filter; do echo 0 > $f; done")

	b.keyV, b.keyI = newKeypair(t), newKeypair(t)
	b.victim = startDaemon(t, b.nsV, im, "flwv")
	b.initiator = startDaemon(t, b.nsI, im.initiatorImpl(), "flwi")
	b.nsV.Run("wg", "set", b.victim.iface, "listen-port", strconv.Itoa(victimPort),
		"private-key", b.keyV.privFile, "peer", b.keyI.pub,
		"endpoint", fmt.Sprintf("%s:%d", undInitiator, victimPort), "allowed-ips", tunInitiator+"/32")
	b.nsI.Run("wg", "set", b.initiator.iface, "listen-port", strconv.Itoa(victimPort),
		"private-key", b.keyI.privFile)
	b.addVictimPeer()
	for _, x := range []struct {
		ns    *netns
		iface string
		addr  string
	}{{b.nsV, b.victim.iface, tunVictim}, {b.nsI, b.initiator.iface, tunInitiator}} {
		x.ns.Run("ip", "addr", "add", x.addr+"/24", "dev", x.iface)
		x.ns.Run("ip", "link", "set", x.iface, "mtu", "1420", "up")
	}
	if _, err := b.nsI.Try("ping", "-n", "-c", "1", "-w", "20", "-i", "0.2", tunVictim); err != nil {
		t.Fatalf("%s: tunnel does not come up: %v", im.name, err)
	}
	srv := b.nsV.Command(context.Background(), "iperf3", "-s", "-p", "5201")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	go srv.Wait() // ended with the namespace
	time.Sleep(300 * time.Millisecond)
	return b
}

// addVictimPeer (re)configures the initiator's peer: the victim.
func (b *testbed) addVictimPeer() {
	b.nsI.Run("wg", "set", b.initiator.iface, "peer", b.keyV.pub,
		"endpoint", fmt.Sprintf("%s:%d", undVictimI, victimPort), "allowed-ips", tunVictim+"/32")
}

// scenario is one row of the benchmark.
type scenario struct {
	name    string
	flood   bool
	port    int // where the flood goes
	single  bool
	cookies bool
	sink    bool // a socket nobody reads holds port (only when asked for)
}

var (
	noFlood      = scenario{name: "no flood"}
	closedFlood  = scenario{name: "flood to a closed port", flood: true, port: closedPort}
	multiFlood   = scenario{name: "flood, 65,536 sources", flood: true, port: victimPort}
	singleFlood  = scenario{name: "flood, 1 source", flood: true, port: victimPort, single: true}
	cookiesFlood = scenario{name: "flood, cookies answered", flood: true, port: victimPort, cookies: true}
	// sinkFlood is the flood at an open port whose socket nobody reads: what
	// the kernel's delivery costs before any user-space work. A diagnostic,
	// run only when FIPS_FLOOD_SCENARIOS names it.
	sinkFlood = scenario{name: "flood to a port nobody reads", flood: true, port: sinkPort, sink: true}
)

// measurement is what one scenario left the legitimate peers and cost the
// victim.
type measurement struct {
	sc           scenario
	gbps         float64
	iperfErr     string
	rttMs        float64    // idle ping through the tunnel, average
	handshake    float64    // seconds for a fresh handshake (the slowest of them), -1: one failed in 30 s
	handshakes   []float64  // every fresh handshake's seconds, -1 for a failed one
	cpuPct       float64    // victim CPU during the TCP transfer, percent of one core
	initCPUPct   float64    // the initiator's, the same way
	machine      machineCPU // the machine's softirq and idle time, the same way
	peakRSSKiB   int64
	sentPPS      float64 // attacker's send rate
	deliveredPPS float64 // packets per second the victim's veth received
	attack       attackResult
	alive        bool
	counters     string // the victim's, when it is fips-go
}

// measure runs one scenario: flood (if any) starts, warms up, then ping,
// iperf3 for secs, and a fresh handshake, all under the flood.
func (b *testbed) measure(sc scenario, secs int, warm time.Duration) measurement {
	b.t.Helper()
	m := measurement{sc: sc}
	pid := b.victim.pid()
	resetPeakRSS(pid)
	rx0, t0 := b.victimRx(), time.Now()
	var stop func() attackResult
	if sc.sink {
		defer b.startSink()()
	}
	if sc.flood {
		stop = b.startAttacker(sc)
		time.Sleep(warm)
	}
	m.rttMs = b.rtt()
	// The CPU columns cover the TCP transfer only: the fresh handshake
	// after it idles for seconds when the initiator waits out
	// Rekey-Timeout, which would dilute them.
	ipid := b.initiator.pid()
	c0, ic0, mc0, ti := netnstest.CPUTicks(pid), netnstest.CPUTicks(ipid), readMachineCPU(), time.Now()
	m.gbps, m.iperfErr = b.iperf(secs)
	eli := time.Since(ti).Seconds()
	m.cpuPct = float64(netnstest.CPUTicks(pid)-c0) / userHZ / eli * 100
	m.initCPUPct = float64(netnstest.CPUTicks(ipid)-ic0) / userHZ / eli * 100
	m.machine = readMachineCPU().since(mc0, eli)
	for i := range b.handshakes {
		if i > 0 {
			// An initiation whose timestamp equals the last one the
			// victim accepted from this key is a replay to it, and
			// timestamps are rounded to 2^24 ns: a handshake straight
			// after the last would be refused for that, not the flood.
			time.Sleep(100 * time.Millisecond)
		}
		h := b.freshHandshake()
		m.handshakes = append(m.handshakes, h)
		if h < 0 || m.handshake >= 0 && h > m.handshake {
			m.handshake = h
		}
		if h < 0 {
			break
		}
	}
	if stop != nil {
		m.attack = stop()
	}
	el := time.Since(t0).Seconds()
	m.deliveredPPS = float64(b.victimRx()-rx0) / el
	if m.attack.Seconds > 0 {
		m.sentPPS = float64(m.attack.Sent) / m.attack.Seconds
	}
	m.peakRSSKiB = netnstest.ProcStatus(pid, "VmHWM")
	m.alive = b.victim.alive()
	m.counters = b.victimCounters()
	return m
}

// victimCounters is a fips-go victim's handshake and cookie counters
// (fips-go show --counters), for the log; "" for other implementations.
func (b *testbed) victimCounters() string {
	if !strings.HasPrefix(b.im.name, "fips-go") {
		return ""
	}
	out, err := b.nsV.Try(b.im.bin, "show", "--counters", b.victim.iface)
	if err != nil {
		return ""
	}
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "handshake") || strings.Contains(l, "cookie") || strings.Contains(l, "shed") {
			keep = append(keep, strings.TrimSpace(l))
		}
	}
	return strings.Join(keep, "\n")
}

func (b *testbed) victimRx() int64 {
	out, err := b.nsV.Try("cat", "/sys/class/net/"+b.victimAttackerIface+"/statistics/rx_packets")
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	return v
}

// rtt is the average of 20 pings 50 ms apart, 0 if none came back.
func (b *testbed) rtt() float64 {
	out, _ := b.nsI.Try("ping", "-n", "-q", "-c", "20", "-i", "0.05", "-W", "1", tunVictim)
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "rtt") {
			f := strings.Split(strings.Fields(l)[3], "/")
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	return 0
}

// iperf runs one TCP stream from the initiator to the victim.
func (b *testbed) iperf(secs int) (float64, string) {
	out, err := b.nsI.Try("iperf3", "-c", tunVictim, "-p", "5201", "-t", strconv.Itoa(secs), "-J")
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
		Error string `json:"error"`
	}
	if i := strings.IndexByte(out, '{'); i < 0 {
		if err == nil {
			err = fmt.Errorf("iperf3 printed no JSON: %q", out)
		}
	} else if jerr := json.Unmarshal([]byte(out[i:]), &r); jerr != nil && err == nil {
		err = jerr
	}
	if r.Error != "" {
		return 0, r.Error
	}
	if err != nil {
		return 0, err.Error()
	}
	return r.End.SumReceived.BitsPerSecond / 1e9, ""
}

// freshHandshake forgets the victim on the initiator and puts it back, then
// times how long until a ping through the tunnel is answered: the new
// handshake, initiated by the initiator, is what that waits for.
func (b *testbed) freshHandshake() float64 {
	b.nsI.Run("wg", "set", b.initiator.iface, "peer", b.keyV.pub, "remove")
	start := time.Now()
	b.addVictimPeer()
	if _, err := b.nsI.Try("ping", "-n", "-c", "1", "-w", "30", "-i", "0.05", tunVictim); err != nil {
		return -1
	}
	return time.Since(start).Seconds()
}

// startAttacker runs b.attackers attacker processes in their namespace,
// each from its own source port; the returned stop ends the flood and
// returns what they counted together.
func (b *testbed) startAttacker(sc scenario) (stop func() attackResult) {
	b.t.Helper()
	var stops []func() attackResult
	for i := range b.attackers {
		stops = append(stops, b.startOneAttacker(sc, attackSrcPort+uint16(i)))
	}
	return func() attackResult {
		var sum attackResult
		for _, stop := range stops {
			r := stop()
			sum.Sent += r.Sent
			sum.SendErrors += r.SendErrors
			sum.Seconds = max(sum.Seconds, r.Seconds)
			sum.CookieReplies += r.CookieReplies
			sum.CookiesOpened += r.CookiesOpened
			sum.OtherReplies += r.OtherReplies
			sum.CPUSeconds += r.CPUSeconds
			if r.Err != "" {
				sum.Err = r.Err
			}
		}
		return sum
	}
}

func (b *testbed) startOneAttacker(sc scenario, srcPort uint16) (stop func() attackResult) {
	b.t.Helper()
	spec, _ := json.Marshal(attackSpec{
		Victim:    fmt.Sprintf("%s:%d", undVictimA, sc.port),
		VictimPub: b.keyV.pub,
		Sources:   floodSources,
		Single:    sc.single,
		Cookies:   sc.cookies,
		SrcPort:   srcPort,
	})
	cmd, stdin, stdout := b.reexec(b.nsA, attackerEnv+"="+string(spec))
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if l, ok := <-lines; !ok || l != "ready" {
		cmd.Wait()
		b.t.Fatalf("attacker did not start: %q", l)
	}
	return func() attackResult {
		stdin.Close()
		var res attackResult
		for l := range lines {
			if j, ok := strings.CutPrefix(l, "result "); ok {
				if err := json.Unmarshal([]byte(j), &res); err != nil {
					b.t.Errorf("attacker result %q: %v", j, err)
				}
			}
		}
		if err := cmd.Wait(); err != nil {
			b.t.Errorf("attacker: %v (%s)", err, res.Err)
		}
		if ps := cmd.ProcessState; ps != nil {
			res.CPUSeconds = (ps.UserTime() + ps.SystemTime()).Seconds()
		}
		return res
	}
}

// reexec starts the test binary again in ns with env added (the attacker,
// the sink: see TestMain), its stdin and stdout piped to the caller.
func (b *testbed) reexec(ns *netns, env string) (*exec.Cmd, io.WriteCloser, io.ReadCloser) {
	b.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.t.Fatal(err)
	}
	cmd := ns.Command(context.Background(), exe)
	cmd.Env = append(os.Environ(), env)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	return cmd, stdin, stdout
}
