package e2e

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSilenceFalseAlarms measures what the early new-handshake rule
// (device/timers/silence.go) costs on real paths that are healthy: the
// handshake initiations each side sends in a fixed time, counted on the
// wire (tcpdump on B's veth end, which sees every datagram either side
// sends), on an idle tunnel with a 25 s persistent keepalive, and on a
// path losing 10% of datagrams each way (dropped at random as they
// arrive, by iptables' statistic match) with a ping a second and every 100 ms. A fips-go
// pair is measured beside a wireguard-go pair on the same kind of path,
// all at once; both rekey every 2 minutes while traffic flows, so the
// difference is what the rule adds. A measurement, not a pass/fail test:
// it runs only with FIPS_SILENCE_BENCH=1, for FIPS_SILENCE_BENCH_MINS
// minutes (default 10), and logs initiations per hour.
func TestSilenceFalseAlarms(t *testing.T) {
	if os.Getenv("FIPS_SILENCE_BENCH") != "1" {
		t.Skip("a measurement: set FIPS_SILENCE_BENCH=1 to run it")
	}
	requireRoot(t)
	requireTool(t, "iptables", "tcpdump")
	mins := 10
	if s := os.Getenv("FIPS_SILENCE_BENCH_MINS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("FIPS_SILENCE_BENCH_MINS=%q", s)
		}
		mins = n
	}
	dur := time.Duration(mins) * time.Minute
	for _, c := range []struct {
		name     string
		fipsGo   bool
		loss     string // probability of loss each way, "" for none
		interval string // ping -i, "" for no traffic
	}{
		{"fips-go/idle", true, "", ""},
		{"wireguard-go/idle", false, "", ""},
		{"fips-go/loss10-ping1s", true, "0.1", "1"},
		{"wireguard-go/loss10-ping1s", false, "0.1", "1"},
		{"fips-go/loss10-ping100ms", true, "0.1", "0.1"},
		{"wireguard-go/loss10-ping100ms", false, "0.1", "0.1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			o := pairOpts{noV6Overlay: true, onlyAKnows: true}
			if !c.fipsGo {
				o.implA, o.implB = wireguardGo(t), wireguardGo(t)
			}
			if c.interval == "" {
				o.keepaliveA = 25
			}
			p := newPair(t, o)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p.a.ns.waitPing(p.b.tun4, 20*time.Second)
			fromA, fromB := countInitiations(t, ctx, p)
			if c.loss != "" {
				for _, end := range []struct {
					ns  *netns
					dev string
				}{{p.link.a, p.link.ifA}, {p.link.b, p.link.ifB}} {
					end.ns.Run("iptables", "-A", "INPUT", "-i", end.dev, "-p", "udp",
						"-m", "statistic", "--mode", "random", "--probability", c.loss, "-j", "DROP")
				}
			}
			var pings strings.Builder
			if c.interval != "" {
				ping := p.a.ns.Command(ctx, "ping", "-q", "-n", "-i", c.interval, "-w", strconv.Itoa(int(dur/time.Second)), p.b.tun4.String())
				ping.Stdout = &pings
				if err := ping.Run(); err != nil && !strings.Contains(pings.String(), "received") {
					t.Fatalf("ping: %v\n%s", err, pings.String())
				}
			} else {
				time.Sleep(dur)
			}
			cancel()
			a, b := <-fromA, <-fromB
			perHour := func(n int) float64 { return float64(n) * float64(time.Hour) / float64(dur) }
			summary := ""
			for _, l := range strings.Split(pings.String(), "\n") {
				if strings.Contains(l, "received") {
					summary = " (ping: " + l + ")"
				}
			}
			t.Logf("%s: initiations in %v after the first handshake: %d from A (the pinging side), %d from B; %.0f and %.0f an hour%s",
				c.name, dur, a, b, perHour(a), perHour(b), summary)
		})
	}
}

// countInitiations counts, until ctx ends, the handshake initiations seen
// on B's veth end from each side.
func countInitiations(t *testing.T, ctx context.Context, p *pair) (fromA, fromB <-chan int) {
	t.Helper()
	cmd := p.link.b.Command(ctx, "tcpdump", "-i", p.link.ifB, "-n", "-l", "-q", "udp and udp[8] = 1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ca, cb := make(chan int, 1), make(chan int, 1)
	srcA := " " + p.link.v4A.String() + "."
	go func() {
		a, b := 0, 0
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), srcA) && strings.Index(sc.Text(), srcA) < strings.Index(sc.Text(), ">") {
				a++
			} else {
				b++
			}
		}
		cmd.Wait()
		ca <- a
		cb <- b
	}()
	time.Sleep(time.Second) // tcpdump attaches
	return ca, cb
}
