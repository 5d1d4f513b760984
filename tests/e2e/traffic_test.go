package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// helperProc is a running traffic helper (see helper_test.go).
type helperProc struct {
	t        testing.TB
	spec     helperSpec
	cmd      *exec.Cmd
	progress atomic.Int64
	ready    chan struct{}
	done     chan struct{}
	res      helperResult
	resOK    bool
	stderr   bytes.Buffer
}

// startHelper runs the helper inside ns; for a sink it returns once the sink
// is listening.
func startHelper(t testing.TB, ns *netns, s helperSpec) *helperProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(s)
	h := &helperProc{t: t, spec: s, ready: make(chan struct{}), done: make(chan struct{})}
	h.cmd = exec.Command("ip", "netns", "exec", ns.Name, exe)
	h.cmd.Env = append(os.Environ(), helperEnv+"="+string(spec))
	h.cmd.Stderr = &h.stderr
	stdout, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go h.read(stdout)
	t.Cleanup(func() {
		h.cmd.Process.Kill()
		<-h.done
	})
	if strings.HasSuffix(s.Mode, "sink") {
		select {
		case <-h.ready:
		case <-h.done:
			t.Fatalf("%s exited before listening: %s", s.Mode, h.stderr.String())
		case <-time.After(15 * time.Second):
			t.Fatalf("%s not listening after 15 s", s.Mode)
		}
	}
	return h
}

func (h *helperProc) read(stdout interface{ Read([]byte) (int, error) }) {
	defer close(h.done)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "ready":
			close(h.ready)
		case strings.HasPrefix(line, "progress "):
			n, _ := strconv.ParseInt(strings.TrimPrefix(line, "progress "), 10, 64)
			h.progress.Store(n)
		case strings.HasPrefix(line, "result "):
			if json.Unmarshal([]byte(strings.TrimPrefix(line, "result ")), &h.res) == nil {
				h.resOK = true
			}
		}
	}
	h.cmd.Wait()
}

// finished reports whether the helper has exited.
func (h *helperProc) finished() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// wait waits for the helper to finish and fails the test unless it
// reported a result without error.
func (h *helperProc) wait(timeout time.Duration) helperResult {
	h.t.Helper()
	select {
	case <-h.done:
	case <-time.After(timeout):
		h.cmd.Process.Kill()
		<-h.done
		h.t.Fatalf("%s did not finish within %v (progress %d)", h.spec.Mode, timeout, h.progress.Load())
	}
	if !h.resOK {
		h.t.Fatalf("%s gave no result: %v\n%s", h.spec.Mode, h.cmd.ProcessState, h.stderr.String())
	}
	if h.res.Err != "" {
		h.t.Fatalf("%s failed: %s", h.spec.Mode, h.res.Err)
	}
	return h.res
}

// startTCP starts a sink in dst listening on addr and a source in src
// sending to it; s sets the amount, rate and seed.
func startTCP(t testing.TB, src, dst *netns, addr netip.AddrPort, s helperSpec) (source, sink *helperProc) {
	t.Helper()
	if s.Timeout == 0 {
		s.Timeout = 3 * time.Minute
	}
	s.Addr = addr.String()
	s.Mode = "tcp-sink"
	sink = startHelper(t, dst, s)
	s.Mode = "tcp-source"
	source = startHelper(t, src, s)
	return source, sink
}

// finishTCP waits for both ends and asserts that the sink read exactly what
// the source wrote (length and SHA-256), and, if want > 0, want bytes.
func finishTCP(t testing.TB, source, sink *helperProc, want int64) helperResult {
	t.Helper()
	timeout := source.spec.Timeout + 10*time.Second
	sent := source.wait(timeout)
	got := sink.wait(timeout)
	if want > 0 && sent.Bytes != want {
		t.Fatalf("source sent %d bytes, want %d", sent.Bytes, want)
	}
	if got.Bytes != sent.Bytes || got.SHA256 != sent.SHA256 {
		t.Fatalf("stream damaged: sent %d bytes sha256 %s, received %d bytes sha256 %s",
			sent.Bytes, sent.SHA256, got.Bytes, got.SHA256)
	}
	return got
}

// tcpTransfer sends s through a TCP connection from src to dst at addr and
// asserts it arrived byte-exact; it logs the rate.
func tcpTransfer(t testing.TB, src, dst *netns, addr netip.AddrPort, s helperSpec) helperResult {
	t.Helper()
	source, sink := startTCP(t, src, dst, addr, s)
	got := finishTCP(t, source, sink, s.Bytes)
	t.Logf("TCP %s: %d bytes intact (sha256 %.16s...) in %.1f s, %.0f Mbit/s",
		addr, got.Bytes, got.SHA256, got.Seconds, mbit(got.Bytes, got.Seconds))
	return got
}

func mbit(bytes int64, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return float64(bytes) * 8 / secs / 1e6
}

// iperfResult is the part of `iperf3 -J` the tests log.
type iperfResult struct {
	End struct {
		SumSent struct {
			BitsPerSecond float64 `json:"bits_per_second"`
			Retransmits   int     `json:"retransmits"`
		} `json:"sum_sent"`
		SumReceived struct {
			BitsPerSecond float64 `json:"bits_per_second"`
			Bytes         int64   `json:"bytes"`
		} `json:"sum_received"`
	} `json:"end"`
	Error string `json:"error"`
}

// iperf runs one iperf3 TCP test from client to a one-off server in server
// listening on addr, and returns the receiver's throughput.
func iperf(t testing.TB, client, server *netns, addr netip.Addr, secs int, reverse bool) iperfResult {
	t.Helper()
	requireTool(t, "iperf3")
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs+60)*time.Second)
	defer cancel()
	srv := server.Command(ctx, "iperf3", "-s", "-1", "-B", addr.String(), "-p", "5201")
	var srvOut bytes.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Wait()
	defer cancel()
	args := []string{"iperf3", "-J", "-c", addr.String(), "-p", "5201", "-t", strconv.Itoa(secs)}
	if reverse {
		args = append(args, "-R")
	}
	var res iperfResult
	var lastOut string
	for attempt := 0; attempt < 20; attempt++ {
		out, _ := client.Command(ctx, args...).Output()
		lastOut = string(out)
		res = iperfResult{}
		if json.Unmarshal(out, &res) == nil && res.Error == "" && res.End.SumReceived.Bytes > 0 {
			return res
		}
		if !strings.Contains(res.Error, "unable to connect") {
			break
		}
		time.Sleep(250 * time.Millisecond) // the server is not listening yet
	}
	t.Fatalf("iperf3 failed: %s\nclient: %.2000s\nserver: %s", res.Error, lastOut, srvOut.String())
	return res
}

// logIperf runs iperf in both directions and logs the throughput.
func logIperf(t testing.TB, label string, client, server *netns, addr netip.Addr, secs int) {
	t.Helper()
	for _, rev := range []bool{false, true} {
		r := iperf(t, client, server, addr, secs, rev)
		dir := "client->server"
		if rev {
			dir = "server->client"
		}
		t.Logf("iperf3 %s %s: %.0f Mbit/s received, %d retransmits",
			label, dir, r.End.SumReceived.BitsPerSecond/1e6, r.End.SumSent.Retransmits)
		if r.End.SumReceived.BitsPerSecond <= 0 {
			t.Errorf("iperf3 %s %s: no throughput", label, dir)
		}
	}
}

// udpTransfer sends count datagrams of size bytes at rate bytes/s from src
// to a sink in dst, asserts that none arrived damaged or twice and that at
// least minFrac of them arrived, and logs the outcome.
func udpTransfer(t testing.TB, src, dst *netns, addr netip.AddrPort, count, size int, rate int64, minFrac float64) helperResult {
	t.Helper()
	s := helperSpec{Addr: addr.String(), Count: count, Size: size, Rate: rate, Seed: 7, Timeout: 2 * time.Minute}
	s.Mode = "udp-sink"
	sink := startHelper(t, dst, s)
	s.Mode = "udp-source"
	source := startHelper(t, src, s)
	sent := source.wait(3 * time.Minute)
	got := sink.wait(3 * time.Minute)
	t.Logf("UDP %s: %d of %d datagrams of %d bytes arrived intact (%.2f%%), %d corrupt, %d duplicated, %.0f Mbit/s offered",
		addr, got.Datagrams, sent.Datagrams, size, 100*float64(got.Datagrams)/float64(sent.Datagrams),
		got.Corrupt, got.Dups, mbit(sent.Bytes, sent.Seconds))
	if got.Corrupt != 0 || got.Dups != 0 {
		t.Errorf("UDP: %d datagrams arrived corrupt and %d twice, want none", got.Corrupt, got.Dups)
	}
	if float64(got.Datagrams) < minFrac*float64(count) {
		t.Errorf("UDP: only %d of %d datagrams arrived, want at least %.0f%%", got.Datagrams, count, minFrac*100)
	}
	return got
}

// tcpAddr and udpAddr are service addresses on n's overlay address.
func svc(a netip.Addr, port int) netip.AddrPort { return netip.AddrPortFrom(a, uint16(port)) }

func fmtBytes(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
