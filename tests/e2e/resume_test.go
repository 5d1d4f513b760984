package e2e

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRestartResumesClients: a client (fips-go, then stock wireguard-go)
// pings the server through the tunnel every 100 ms; the server's daemon is
// killed (SIGKILL: no clean shutdown) and started again with the same
// configuration, three times. Every WireGuard client would otherwise wait
// keepalive + rekey timeout (15 s) before it starts a new handshake; the
// restarted fips-go finds where its peers were in its state file and
// initiates itself, so the longest gap between replies stays under 4 s
// (the daemon's own restart and reconfiguration included). The gaps are
// logged.
func TestRestartResumesClients(t *testing.T) {
	requireRoot(t)
	for _, mk := range []func(testing.TB) impl{fipsGo, wireguardGo} {
		client := mk(t)
		t.Run(client.name+"-client", func(t *testing.T) {
			p := newPair(t, pairOpts{implA: client, onlyAKnows: true, noV6Overlay: true})
			server, cl := p.b, p.a
			cl.ns.waitPing(server.tun4, 20*time.Second)
			for round := 1; round <= 3; round++ {
				gap := restartRound(t, p, server, cl)
				t.Logf("round %d: longest gap between ping replies %.2f s", round, gap.Seconds())
				if gap > 4*time.Second {
					t.Errorf("round %d: replies stopped for %.1f s across the restart, want under 4 s", round, gap.Seconds())
				}
			}
			c := server.counters()
			if c["sessions_resumed"] == 0 || c["resume_initiations_sent"] == 0 {
				t.Errorf("the last restarted daemon shows no resumption: %v", nonZero(c))
			}
		})
	}
}

// restartRound pings from cl to server every 100 ms, kills and restarts
// the server's daemon after 3 s (so that its state file has been written
// since the last round), and returns the longest time between replies.
func restartRound(t *testing.T, p *pair, server, cl *node) time.Duration {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := cl.ns.Command(ctx, "ping", "-n", "-D", "-i", "0.1", "-W", "1", server.tun4.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	replies := make(chan []float64, 1)
	go func() {
		var ts []float64
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "[") || !strings.Contains(line, "bytes from") {
				continue
			}
			if v, err := strconv.ParseFloat(line[1:strings.IndexByte(line, ']')], 64); err == nil {
				ts = append(ts, v)
			}
		}
		replies <- ts
	}()
	time.Sleep(3 * time.Second)
	if err := syscall.Kill(server.pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -KILL %d: %v", server.pid, err)
	}
	eventually(t, 5*time.Second, "the killed daemon is gone", func() bool { return !processAlive(server.pid) })
	os.Remove(server.socketPath()) // a killed daemon leaves it behind
	// The kernel removes the dead daemon's interface on its own time; a
	// new one of the same name can only be created after that.
	eventually(t, 5*time.Second, "the killed daemon's interface is gone", func() bool {
		_, err := server.ns.Try("ip", "link", "show", "dev", server.iface)
		return err != nil
	})
	server.pid = 0
	server.launch()
	server.configure("wg", cl, peerOpts{})
	server.up(0)
	time.Sleep(6 * time.Second)
	cancel()
	cmd.Wait()
	ts := <-replies
	if len(ts) < 2 {
		t.Fatalf("only %d ping replies", len(ts))
	}
	var longest time.Duration
	for i := 1; i < len(ts); i++ {
		longest = max(longest, time.Duration((ts[i]-ts[i-1])*float64(time.Second)))
	}
	// Replies must have resumed before the end, not merely been few.
	if end := time.Duration((ts[len(ts)-1] - ts[0]) * float64(time.Second)); end < 8*time.Second {
		t.Fatalf("replies stopped after %.1f s and never came back", end.Seconds())
	}
	return longest
}
