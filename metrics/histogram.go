package metrics

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/internal/hist"
)

// The device reports each sojourn-time histogram as plain counters
// (sojourn_STAGE_us_le_BOUND, cumulative, and sojourn_STAGE_sum_ns); they
// are exported as one Prometheus histogram, fipsgo_sojourn_seconds{stage}.
// The exposition library builds histograms only from observations it makes
// itself, so this family is written here, in the same text format.
const sojournFamily = "fipsgo_sojourn_seconds"

type sojourn struct {
	buckets [hist.Buckets]uint64 // cumulative, by bucket index
	seen    [hist.Buckets]bool
	sumNs   uint64
}

// splitSojourn takes the sojourn counters out of cs, by stage in the
// order they come.
func splitSojourn(cs []device.Counter) (stages []string, byStage map[string]*sojourn, rest []device.Counter) {
	byStage = map[string]*sojourn{}
	get := func(stage string) *sojourn {
		s := byStage[stage]
		if s == nil {
			s = new(sojourn)
			byStage[stage] = s
			stages = append(stages, stage)
		}
		return s
	}
	for _, c := range cs {
		name, ok := strings.CutPrefix(c.Name, "sojourn_")
		if !ok {
			rest = append(rest, c)
			continue
		}
		if stage, ok := strings.CutSuffix(name, "_sum_ns"); ok {
			get(stage).sumNs = c.Value
			continue
		}
		stage, bound, ok := strings.Cut(name, "_us_le_")
		i := bucketIndex(bound)
		if !ok || i < 0 {
			rest = append(rest, c)
			continue
		}
		s := get(stage)
		s.buckets[i], s.seen[i] = c.Value, true
	}
	return stages, byStage, rest
}

func bucketIndex(label string) int {
	for i := range hist.Buckets {
		if hist.Label(i) == label {
			return i
		}
	}
	return -1
}

// writeSojourn writes the histograms of the stages that have every bucket.
func writeSojourn(w io.Writer, iface string, stages []string, byStage map[string]*sojourn) {
	header := false
	for _, stage := range stages {
		s := byStage[stage]
		complete := true
		for _, ok := range s.seen {
			complete = complete && ok
		}
		if !complete {
			continue
		}
		if !header {
			fmt.Fprintf(w, "# HELP %s Time packets spent in a stage of the data path: rx_socket in the UDP socket's queue (kernel receive timestamps), tx_pipeline from TUN read to UDP send, rx_pipeline from UDP receive to TUN write.\n", sojournFamily)
			fmt.Fprintf(w, "# TYPE %s histogram\n", sojournFamily)
			header = true
		}
		labels := `interface="` + iface + `",stage="` + escapeLabel(sanitize(stage)) + `"`
		for i, v := range s.buckets {
			le := "+Inf"
			if i < hist.Buckets-1 {
				le = strconv.FormatFloat(hist.UpperBound(i).Seconds(), 'g', -1, 64)
			}
			fmt.Fprintf(w, "%s_bucket{%s,le=%q} %d\n", sojournFamily, labels, le, v)
		}
		fmt.Fprintf(w, "%s_sum{%s} %s\n", sojournFamily, labels, strconv.FormatFloat(float64(s.sumNs)/1e9, 'g', -1, 64))
		fmt.Fprintf(w, "%s_count{%s} %d\n", sojournFamily, labels, s.buckets[hist.Buckets-1])
	}
}
