package metrics

import (
	"slices"
	"strconv"
	"strings"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/internal/hist"
)

// The device reports each sojourn-time histogram as plain counters
// (sojourn_STAGE_us_le_BOUND, cumulative, and sojourn_STAGE_sum_ns); they
// are exported as one Prometheus histogram, fipsgo_sojourn_seconds{stage}.
const (
	sojournFamily = "fipsgo_sojourn_seconds"
	sojournHelp   = "Time packets spent in a stage of the data path: rx_socket in the UDP socket's queue (kernel receive timestamps), tx_pipeline from TUN read to UDP send, rx_pipeline from UDP receive to TUN write."
)

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

// addSojourn adds the histograms of the stages that have every bucket,
// sorted by stage.
func addSojourn(e *exposition, iface string, stages []string, byStage map[string]*sojourn) {
	stages = slices.Sorted(slices.Values(stages))
	done := map[string]bool{} // two stages may sanitize alike
	for _, stage := range stages {
		s, name := byStage[stage], sanitize(stage)
		if slices.Contains(s.seen[:], false) || done[name] {
			continue
		}
		done[name] = true
		l := labels(iface, "stage", name)
		for i, v := range s.buckets {
			le := "+Inf"
			if i < hist.Buckets-1 {
				le = strconv.FormatFloat(hist.UpperBound(i).Seconds(), 'g', -1, 64)
			}
			e.add(sojournFamily, kindHistogram, sojournHelp, sample{suffix: "_bucket", labels: labels(l, "le", le), v: uintValue(v)})
		}
		e.add(sojournFamily, kindHistogram, sojournHelp, sample{suffix: "_sum", labels: l, v: floatValue(float64(s.sumNs) / 1e9)})
		e.add(sojournFamily, kindHistogram, sojournHelp, sample{suffix: "_count", labels: l, v: uintValue(s.buckets[hist.Buckets-1])})
	}
}
