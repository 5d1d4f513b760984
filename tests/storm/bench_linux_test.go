//go:build linux

package storm

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/testkit/netnstest"
)

// TestStormBenchmark is the handshake storm of scripts/bench-storm.sh: for
// each implementation, a freshly started gateway (a restart) with
// FIPS_STORM_CONFIGURED peers (default: as many as the storm) meets
// FIPS_STORM_PEERS simulated peers (default 10,000) that all initiate
// within one second and, once they have a session, send one echo request
// each. It prints, per run, the time until 99% and 100% of them had a
// session, handshakes per CPU-second of the gateway, the cookie replies,
// the gateway's RSS and threads per session, and its CPU while idle with
// every session up. FIPS_STORM_RUNS repeats each (default 1),
// FIPS_STORM_ONLY (comma-separated names) keeps only some rows, and
// FIPS_STORM_TS_BIN names Tailscale's fork (default bin/wireguard-go-ts),
// measured only when FIPS_STORM_ONLY names it. FIPS_STORM_SIM_ARGS adds
// peersim run flags (-retry-on-cookie: peers that retry at once after a
// cookie reply instead of at their next retransmission).
func TestStormBenchmark(t *testing.T) {
	if os.Getenv("FIPS_STORM") != "1" {
		t.Skip("the storm benchmark runs with FIPS_STORM=1 (scripts/bench-storm.sh)")
	}
	requireRoot(t)
	peers := envInt(t, "FIPS_STORM_PEERS", 10000)
	configured := envInt(t, "FIPS_STORM_CONFIGURED", peers)
	runs := envInt(t, "FIPS_STORM_RUNS", 1)
	idle := envInt(t, "FIPS_STORM_IDLE_SECS", 10)
	if configured < peers {
		t.Fatalf("FIPS_STORM_CONFIGURED %d < FIPS_STORM_PEERS %d", configured, peers)
	}
	dir := t.TempDir()
	peersim := build(t, dir, "peersim", "./tests/peersim")
	impls := []impl{fipsGo(t, dir), {"wireguard-go", build(t, dir, "wireguard-go", "golang.zx2c4.com/wireguard")}}
	ts := os.Getenv("FIPS_STORM_TS_BIN")
	if ts == "" {
		ts, _ = filepath.Abs("../../bin/wireguard-go-ts")
	}
	// Tailscale's fork answers no initiation from a peer without a
	// configured endpoint ("no known endpoint for peer": it learns none
	// from handshakes), so it cannot serve this road-warrior gateway; it
	// runs only when FIPS_STORM_ONLY names it.
	if _, err := os.Stat(ts); err == nil && strings.Contains(os.Getenv("FIPS_STORM_ONLY"), "wireguard-go-ts") {
		impls = append(impls, impl{"wireguard-go-ts", ts})
	}
	if only := os.Getenv("FIPS_STORM_ONLY"); only != "" {
		impls = slices.DeleteFunc(impls, func(im impl) bool { return !slices.Contains(strings.Split(only, ","), im.name) })
	}
	var rows []string
	for _, im := range impls {
		for run := range runs {
			rows = append(rows, stormRow(t, im, peersim, configured, peers, uint64(run+1), idle))
			t.Log(rows[len(rows)-1])
		}
	}
	cpu := "no AVX-512 IFMA"
	if b, _ := os.ReadFile("/proc/cpuinfo"); strings.Contains(string(b), "avx512ifma") {
		cpu = "AVX-512 IFMA"
	}
	fmt.Printf("\nHandshake storm: %d peers initiate within 1 s, %d configured (%s)\n\n", peers, configured, cpu)
	fmt.Println("| impl | sessions | 99% at | 100% at | handshake p50 / p99 | handshakes per CPU-second | peers with a cookie reply (replies) | retries | echo replies | RSS per session | threads | idle CPU, sessions up |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Println(r)
	}
}

func stormRow(t *testing.T, im impl, peersim string, configured, peers int, seed uint64, idle int) string {
	b := newTestbed(t, im, peersim, configured, seed)
	defer b.stop()
	time.Sleep(2 * time.Second) // setconf's garbage settles
	pid := b.pid()
	rss0 := netnstest.ProcStatus(pid, "VmRSS")
	var rss1, threads int64
	idlePct := -1.0
	r, cpu := b.runSim(peers, func() {
		rss1, threads = netnstest.ProcStatus(pid, "VmRSS"), netnstest.ProcStatus(pid, "Threads")
		c0 := netnstest.CPUTicks(pid)
		time.Sleep(time.Duration(idle) * time.Second)
		idlePct = float64(netnstest.CPUTicks(pid)-c0) / userHZ / float64(idle) * 100
	}, append([]string{"-storm", "1s", "-rate", "1", "-pings", "1", "-until-done", "-duration", "45s",
		"-linger", fmt.Sprintf("%ds", idle+2)}, strings.Fields(os.Getenv("FIPS_STORM_SIM_ARGS"))...)...)
	if im.name == "fips-go" {
		out := b.nsG.Run(im.bin, "show", "--counters", b.iface)
		if i := strings.Index(out, "counters:"); i >= 0 {
			out = out[i:] // the peers before are 10,000 lines
		}
		t.Logf("%s after the storm:\n%s", im.name, out)
	}
	if rss1 == 0 { // the storm did not complete
		rss1, threads = netnstest.ProcStatus(pid, "VmRSS"), netnstest.ProcStatus(pid, "Threads")
	}
	secs := func(v float64) string {
		if v < 0 {
			return "never"
		}
		return fmt.Sprintf("%.2f s", v)
	}
	perSession := "-"
	if r.Established > 0 {
		perSession = fmt.Sprintf("%.1f KiB", float64(rss1-rss0)/float64(r.Established))
	}
	idleCol := "- (storm incomplete)"
	if idlePct >= 0 {
		idleCol = fmt.Sprintf("%.1f%%", idlePct)
	}
	return fmt.Sprintf("| %s | %d/%d | %s | %s | %.0f / %.0f ms | %.0f | %d (%d) | %d | %d | %s | %d | %s |",
		im.name, r.Established, peers, secs(r.T99), secs(r.T100), r.LatencyP50ms, r.LatencyP99ms,
		float64(r.Established)/max(cpu, 0.01), r.PeersWithCookie, r.CookieReplies, r.Retries,
		r.Replies, perSession, threads, idleCol)
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}
