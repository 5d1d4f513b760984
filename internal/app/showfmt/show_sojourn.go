package showfmt

import (
	"bufio"
	"fmt"
	"strings"
	"time"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/internal/hist"
)

// sojournPrefix starts the counters that carry sojourn-time histograms,
// sojourn_STAGE_us_le_BOUND, cumulative as a Prometheus histogram's buckets.
const sojournPrefix = "sojourn_"

// sojournStages gathers the histogram counters by stage, in the order they
// come, and returns the others.
func sojournStages(cs []device.Counter) (names []string, snaps map[string]*hist.Snapshot, rest []device.Counter) {
	snaps = map[string]*hist.Snapshot{}
	prev := map[string]uint64{}
	for _, c := range cs {
		if strings.HasPrefix(c.Name, sojournPrefix) && strings.HasSuffix(c.Name, "_sum_ns") {
			continue // the summary here has no use for the total
		}
		stage, bound, ok := strings.Cut(strings.TrimPrefix(c.Name, sojournPrefix), "_us_le_")
		if !strings.HasPrefix(c.Name, sojournPrefix) || !ok {
			rest = append(rest, c)
			continue
		}
		i := bucketOf(bound)
		if i < 0 {
			rest = append(rest, c)
			continue
		}
		s := snaps[stage]
		if s == nil {
			s = new(hist.Snapshot)
			snaps[stage] = s
			names = append(names, stage)
		}
		if c.Value >= prev[stage] {
			s[i] = c.Value - prev[stage]
			prev[stage] = c.Value
		}
	}
	return names, snaps, rest
}

func bucketOf(label string) int {
	for i := range hist.Buckets {
		if hist.Label(i) == label {
			return i
		}
	}
	return -1
}

// writeSojourn prints one line per stage that saw packets: the median,
// 90th and 99th percentile of the time packets spent there, each as the
// upper bound of its power-of-two bucket, since the device started.
func writeSojourn(bw *bufio.Writer, names []string, snaps map[string]*hist.Snapshot) {
	header := false
	for _, name := range names {
		s := snaps[name]
		n := s.Total()
		if n == 0 {
			continue
		}
		if !header {
			bw.WriteString("\nsojourn (p50 / p90 / p99, bucket upper bounds, since start):\n")
			header = true
		}
		fmt.Fprintf(bw, "  %s: %s / %s / %s  (%d packets)\n", name,
			quantile(s, 0.5), quantile(s, 0.9), quantile(s, 0.99), n)
	}
}

func quantile(s *hist.Snapshot, q float64) string {
	d, ok := s.Quantile(q)
	if !ok {
		return ">" + fmtDur(d)
	}
	return "≤" + fmtDur(d)
}

func fmtDur(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%dµs", d.Microseconds())
	}
	return fmt.Sprintf("%gms", float64(d.Microseconds())/1000)
}
