//go:build linux

package flood

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFloodSmoke is the short version that runs with the end-to-end
// tests: fips-go as victim and initiator, a few seconds each of no flood,
// a flood from 65,536 sources and a flood whose sources answer cookie
// replies. It asserts what must hold on any machine, however slow: the
// flood reached the victim, the victim answered it with cookie replies
// (it went under load), the attacker could use those cookies, and through
// it all the victim stayed up, carried TCP and completed fresh handshakes.
// How much throughput and how fast is the benchmark's business.
func TestFloodSmoke(t *testing.T) {
	if testing.Short() && os.Getenv("FIPS_E2E") != "1" {
		t.Skip("flood smoke test skipped in -short mode")
	}
	requireRoot(t)
	im := buildImpls(t, false)[0]
	b := newTestbed(t, im)
	var rows []measurement
	for _, sc := range []scenario{noFlood, multiFlood, cookiesFlood} {
		m := b.measure(sc, 2, 500*time.Millisecond)
		rows = append(rows, m)
		if !m.alive {
			t.Fatalf("%s: victim exited", sc.name)
		}
		if m.gbps <= 0 {
			t.Errorf("%s: no TCP through the tunnel: %s", sc.name, m.iperfErr)
		}
		if m.handshake < 0 {
			t.Errorf("%s: no fresh handshake within 30 s", sc.name)
		}
		if !sc.flood {
			continue
		}
		if m.attack.Sent == 0 || m.deliveredPPS == 0 {
			t.Errorf("%s: the flood did not reach the victim (sent %d, %.0f/s delivered)", sc.name, m.attack.Sent, m.deliveredPPS)
		}
		if m.attack.CookieReplies == 0 {
			t.Errorf("%s: no cookie replies: the victim never went under load, or the MAC1 is wrong", sc.name)
		}
		if sc.cookies && m.attack.CookiesOpened == 0 {
			t.Errorf("%s: the attacker opened none of %d cookie replies", sc.name, m.attack.CookieReplies)
		}
	}
	t.Log("\n" + table([]impl{im}, [][]measurement{rows}))
}

// TestFloodBenchmark is the whole benchmark (FIPS_FLOOD=1): every
// implementation as victim (and initiator), every scenario for
// FIPS_FLOOD_SECS seconds of iperf3 (default 10), printed side by side.
// FIPS_FLOOD_ATTACKERS attacker processes (default 1) share the flood,
// and each row times FIPS_FLOOD_HANDSHAKES fresh handshakes (default 20).
func TestFloodBenchmark(t *testing.T) {
	if os.Getenv("FIPS_FLOOD") != "1" {
		t.Skip("the flood benchmark runs with FIPS_FLOOD=1 (sudo bash scripts/bench-flood.sh)")
	}
	requireRoot(t)
	secs := 10
	if v, err := strconv.Atoi(os.Getenv("FIPS_FLOOD_SECS")); err == nil && v > 0 {
		secs = v
	}
	attackers, handshakes := envCount(t, "FIPS_FLOOD_ATTACKERS", 1), envCount(t, "FIPS_FLOOD_HANDSHAKES", 20)
	impls := buildImpls(t, true)
	var all [][]measurement
	for _, im := range impls {
		var rows []measurement
		t.Run(im.name, func(t *testing.T) {
			b := newTestbed(t, im)
			b.attackers, b.handshakes = attackers, handshakes
			for _, sc := range scenarios(t) {
				m := b.measure(sc, secs, time.Second)
				t.Logf("%s / %s: %.2f Gbit/s %s, rtt %.2f ms, handshakes %.2f s, cpu %.0f%%, peak RSS %d KiB, flood %.0f/s sent %.0f/s delivered, attacker %+v",
					im.name, sc.name, m.gbps, m.iperfErr, m.rttMs, m.handshakes, m.cpuPct, m.peakRSSKiB, m.sentPPS, m.deliveredPPS, m.attack)
				if m.counters != "" {
					t.Logf("%s / %s: victim's counters so far:\n%s", im.name, sc.name, m.counters)
				}
				rows = append(rows, m)
				if !m.alive {
					t.Errorf("%s: victim exited during %s", im.name, sc.name)
					break
				}
			}
		})
		all = append(all, rows)
	}
	fmt.Println(table(impls, all))
}

// envCount is the positive integer in the environment variable name, or
// def when it is unset; anything else fails the test.
func envCount(t testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		t.Fatalf("%s=%q: want a count from 1 to 1000", name, v)
	}
	return n
}

// scenarios are the benchmark's rows in order. FIPS_FLOOD_SCENARIOS, a
// list of their names separated by semicolons (the names hold commas), keeps only those it names (to
// profile one scenario, say); a name that matches none fails the test.
func scenarios(t testing.TB) []scenario {
	all := []scenario{noFlood, closedFlood, multiFlood, singleFlood, cookiesFlood}
	only := os.Getenv("FIPS_FLOOD_SCENARIOS")
	if only == "" {
		return all
	}
	all = append(all, sinkFlood) // a diagnostic: only when named
	var kept []scenario
	for _, name := range strings.Split(only, ";") {
		i := slices.IndexFunc(all, func(sc scenario) bool { return sc.name == name })
		if i < 0 {
			t.Fatalf("FIPS_FLOOD_SCENARIOS: no scenario %q", name)
		}
		kept = append(kept, all[i])
	}
	return kept
}

// table prints one row per scenario and implementation. "kept" is the
// throughput as a share of the closed-port baseline (the attacker's own
// CPU cost), or of the no-flood run when there is no baseline row.
func table(impls []impl, rows [][]measurement) string {
	var sb strings.Builder
	sb.WriteString("| victim | scenario | TCP | kept | ping RTT | fresh handshake | victim CPU | peak RSS | flood sent / delivered | cookie replies | attacker CPU | initiator CPU | softirq | idle |\n")
	sb.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for i, im := range impls {
		if i >= len(rows) {
			break
		}
		base := 0.0
		for _, m := range rows[i] {
			if m.sc == closedFlood || (base == 0 && m.sc == noFlood) {
				base = m.gbps
			}
		}
		for _, m := range rows[i] {
			kept, hs, flood, cookies, attackCPU := "", "failed", "", "", ""
			if base > 0 && m.sc.flood && m.sc.port != closedPort {
				kept = fmt.Sprintf("%.0f%%", 100*m.gbps/base)
			}
			if m.handshake >= 0 {
				hs = fmt.Sprintf("%.2f s", m.handshake)
			}
			if len(m.handshakes) > 1 {
				within := 0
				for _, h := range m.handshakes {
					if h >= 0 && h <= 2 {
						within++
					}
				}
				hs = fmt.Sprintf("%d/%d in 2 s, max %s", within, len(m.handshakes), hs)
			}
			if m.sc.flood {
				flood = fmt.Sprintf("%.0fk / %.0fk/s", m.sentPPS/1e3, m.deliveredPPS/1e3)
				cookies = fmt.Sprintf("%.0f/s", float64(m.attack.CookieReplies)/max(m.attack.Seconds, 1e-9))
				attackCPU = fmt.Sprintf("%.0f%%", 100*m.attack.CPUSeconds/max(m.attack.Seconds, 1e-9))
			}
			fmt.Fprintf(&sb, "| %s | %s | %.2f Gbit/s | %s | %.2f ms | %s | %.0f%% | %.0f MiB | %s | %s | %s | %.0f%% | %.0f%% | %.0f%% |\n",
				im.name, m.sc.name, m.gbps, kept, m.rttMs, hs, m.cpuPct, float64(m.peakRSSKiB)/1024, flood, cookies, attackCPU,
				m.initCPUPct, m.machine.softirq, m.machine.idle)
		}
	}
	return sb.String()
}
