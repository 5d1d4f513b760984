//go:build linux

package storm

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestActivePeersBenchmark (FIPS_STORM=1, FIPS_STORM_ACTIVE=1) offers the
// gateway the same echo load from one peer and from FIPS_STORM_PEERS
// peers (default 1,000) at once, of FIPS_STORM_CONFIGURED configured
// (default 10,000): FIPS_STORM_PPS echo requests a second in all (default
// 20,000) of 1,300-byte payloads, for 12 s. The gateway's kernel answers
// each through the tunnel. It prints the goodput of the replies, their
// loss and RTT, the gateway's CPU, and for many peers the spread of their
// goodput against a fair share. The log has the gateway's UDP counters,
// its sockets' unread datagrams at the end and, for fips-go, its
// counters; FIPS_STORM_DUMP=1 has the gateway print its goroutines after
// the many-peer run (SIGQUIT).
func TestActivePeersBenchmark(t *testing.T) {
	if os.Getenv("FIPS_STORM") != "1" || os.Getenv("FIPS_STORM_ACTIVE") != "1" {
		t.Skip("runs with FIPS_STORM=1 FIPS_STORM_ACTIVE=1")
	}
	requireRoot(t)
	peers := envInt(t, "FIPS_STORM_PEERS", 1000)
	configured := envInt(t, "FIPS_STORM_CONFIGURED", 10000)
	pps := envInt(t, "FIPS_STORM_PPS", 20000)
	dir := t.TempDir()
	peersim := build(t, dir, "peersim", "./tests/peersim")
	impls := []impl{fipsGo(t, dir), {"wireguard-go", build(t, dir, "wireguard-go", "golang.zx2c4.com/wireguard")}}
	if only := os.Getenv("FIPS_STORM_ONLY"); only != "" {
		var kept []impl
		for _, im := range impls {
			if strings.Contains(only, im.name) {
				kept = append(kept, im)
			}
		}
		impls = kept
	}
	const secs = 12
	var rows []string
	for _, im := range impls {
		for _, n := range []int{1, peers} {
			b := newTestbed(t, im, peersim, max(configured, n), 1)
			time.Sleep(time.Second)
			rate := float64(pps) / float64(n)
			r, cpu := b.runSim(n, nil, "-storm", "1s", "-duration", strconv.Itoa(secs)+"s",
				"-rate", strconv.FormatFloat(rate, 'f', 2, 64), "-payload", "1300")
			t.Logf("gateway UDP: %s\nsimulator UDP: %s", udpStats(b.nsG.Run("cat", "/proc/net/snmp")), udpStats(b.nsS.Run("cat", "/proc/net/snmp")))
			if im.name == "fips-go" {
				out := b.nsG.Run(im.bin, "show", "--counters", b.iface)
				if i := strings.Index(out, "counters:"); i >= 0 {
					out = out[i:]
				}
				t.Logf("%s, %d peers:\n%s", im.name, n, out)
			}
			if q, err := b.nsG.Try("sh", "-c", "ss -uanH | awk '$2>0{n++; s+=$2} END{print n+0, s+0}'"); err == nil {
				t.Logf("gateway sockets with unread datagrams, bytes unread: %s", q)
			}
			if os.Getenv("FIPS_STORM_DUMP") == "1" && n > 1 {
				b.cmd.Process.Signal(syscall.SIGQUIT) // goroutines to stderr
				<-b.done
			}
			b.stop()
			fair := r.GoodputMbps * 1000 / float64(n)
			rows = append(rows, fmt.Sprintf("| %s | %d | %d | %.0f | %.1f | %.2f%% | %.2f / %.2f ms | %.0f%% | %s |",
				im.name, n, r.Established, rate, r.GoodputMbps, r.LossPct, r.RTTP50ms, r.RTTP99ms,
				cpu/float64(secs)*100, spread(n, fair, r)))
			t.Log(rows[len(rows)-1])
		}
	}
	fmt.Printf("\nActive peers: %d echo requests a second of 1,300 bytes in all, %d s\n\n", pps, secs)
	fmt.Println("| impl | peers sending | sessions | requests/s per peer | reply goodput, Mbit/s | loss | RTT p50 / p99 | gateway CPU | per-peer goodput min / p10 / median, of a fair share |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Println(r)
	}
}

func spread(n int, fair float64, r simReport) string {
	if n == 1 || fair <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%% / %.0f%% / %.0f%%", 100*r.PeerMinK/fair, 100*r.PeerP10K/fair, 100*r.PeerMedK/fair)
}

// udpStats is the Udp lines of /proc/net/snmp.
func udpStats(snmp string) string {
	var keep []string
	for _, l := range strings.Split(snmp, "\n") {
		if strings.HasPrefix(l, "Udp:") || strings.HasPrefix(l, "Ip:") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
