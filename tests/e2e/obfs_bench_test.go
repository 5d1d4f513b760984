package e2e

import (
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/testkit/netnstest"
)

// TestObfuscationThroughput measures, in one run, plain, AmneziaWG 1.0,
// AmneziaWG 2.0 (S3/S4 padding, type ranges) and 2.0 with 3.x's header
// protection fips-go tunnels between two
// namespaces: iperf3 single-stream TCP, runs interleaved (each run starting
// with another kind, so that the machine's drifting load is not charged to
// one), medians logged; the CPU time both daemons spent per GB, which
// depends less than throughput on what else the machine runs; and the time
// from `ip link up` to the first ping answered (the handshake, junk and
// signature packets included). A measurement, not a pass/fail test: it
// runs only with FIPS_OBFS_BENCH=1 (see docs/benchmarks.md).
// FIPS_OBFS_BENCH_SECS sets each run's length.
func TestObfuscationThroughput(t *testing.T) {
	if os.Getenv("FIPS_OBFS_BENCH") != "1" {
		t.Skip("a measurement: set FIPS_OBFS_BENCH=1 to run it")
	}
	requireRoot(t)
	secs := 5
	if s := os.Getenv("FIPS_OBFS_BENCH_SECS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("FIPS_OBFS_BENCH_SECS=%q", s)
		}
		secs = n
	}
	cases := []struct {
		name string
		args []string
	}{{"plain", nil}, {"awg1.0", awgArgs}, {"awg2.0", awg2Args}, {"awg3-hp", awg3Args(t)}}
	mbit := map[string][]float64{}
	hs := map[string][]float64{}
	cpu := map[string][]float64{} // both daemons' CPU seconds per GB received
	for run := 0; run < 3; run++ {
		// Each run starts with another kind: the machine's load drifts,
		// and a fixed order would charge the drift to the last kind.
		for k := range cases {
			c := cases[(run+k)%len(cases)]
			p := newPair(t, pairOpts{obfsA: c.args, obfsB: c.args, noV6Overlay: true})
			start := time.Now()
			p.a.ns.waitPing(p.b.tun4, 20*time.Second)
			hs[c.name] = append(hs[c.name], float64(time.Since(start).Microseconds())/1000)
			t0 := netnstest.CPUTicks(p.a.pid) + netnstest.CPUTicks(p.b.pid)
			r := iperf(t, p.a.ns, p.b.ns, p.b.tun4, secs, false)
			ticks := netnstest.CPUTicks(p.a.pid) + netnstest.CPUTicks(p.b.pid) - t0
			mbit[c.name] = append(mbit[c.name], r.End.SumReceived.BitsPerSecond/1e6)
			if gb := float64(r.End.SumReceived.Bytes) / 1e9; gb > 0 {
				cpu[c.name] = append(cpu[c.name], float64(ticks)/100/gb)
			}
		}
	}
	base := median(mbit["plain"])
	for _, c := range cases {
		m := median(mbit[c.name])
		t.Logf("%-7s TCP %6.0f Mbit/s median (runs %.0f), %3.0f%% of plain; CPU %.2f s/GB median (runs %.2f); first ping %.1f ms median (runs %.1f)",
			c.name, m, mbit[c.name], 100*m/base, median(cpu[c.name]), cpu[c.name], median(hs[c.name]), hs[c.name])
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
