package fairness

import (
	"fmt"
	"io"
	"slices"
)

// shares summarises how evenly delivered counts spread over the senders.
type shares struct {
	total     uint64
	fair      float64 // total / senders
	min, med  float64 // as fractions of fair
	max       float64
	jain      float64 // (Σx)² / (n·Σx²): 1 when equal, 1/n when one takes all
	belowHalf int     // senders under half of fair
	zero      int     // senders with nothing delivered
}

// summarise computes shares of counts; fair is total/len(counts) unless
// fairOverride > 0 (the heavy scenario measures the light peers against the
// fair share of all senders).
func summarise(counts []uint64, fairOverride float64) shares {
	var s shares
	if len(counts) == 0 {
		return s
	}
	var sum, sumSq float64
	for _, c := range counts {
		s.total += c
		f := float64(c)
		sum += f
		sumSq += f * f
		if c == 0 {
			s.zero++
		}
	}
	s.fair = sum / float64(len(counts))
	if fairOverride > 0 {
		s.fair = fairOverride
	}
	if sumSq > 0 {
		s.jain = sum * sum / (float64(len(counts)) * sumSq)
	}
	if s.fair == 0 {
		return s
	}
	rel := make([]float64, len(counts))
	for i, c := range counts {
		rel[i] = float64(c) / s.fair
		if rel[i] < 0.5 {
			s.belowHalf++
		}
	}
	slices.Sort(rel)
	s.min, s.max = rel[0], rel[len(rel)-1]
	if n := len(rel); n%2 == 1 {
		s.med = rel[n/2]
	} else {
		s.med = (rel[n/2-1] + rel[n/2]) / 2
	}
	return s
}

// row is one line of the result table.
type row struct {
	scenario string
	dir      string
	pps      float64 // delivered packets a second, all senders
	mbps     float64 // delivered MB/s (10^6 bytes), all senders
	light    shares  // delivered: every sender, or the light ones in the heavy scenario
	heavy    float64 // the heavy peer's delivered share of fair; 0 when none
	// sent and heavySent are the same for the bytes that left the sending
	// device: the gateway's send path outbound, the spokes' inbound.
	sent      shares
	heavySent float64
	// offered is what entered the sending TUN; passMin and passMax the
	// range of the gateway's per-peer pass ratio (see passRange).
	offered          shares
	heavyOffered     float64
	passMin, passMax float64
	all              float64 // Jain's index over all senders, heavy included
	drops            string  // the gateway's nonzero drop counters during the run
}

func printTable(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| scenario | direction | delivered | share offered (min / med / max) | sent | delivered | gateway pass ratio | heavy offered, sent, delivered | Jain (all) | below ½ | zero | drops during the run |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		heavy := "-"
		if r.heavy > 0 {
			heavy = fmt.Sprintf("%.1f, %.1f, %.1f", r.heavyOffered, r.heavySent, r.heavy)
		}
		drops := r.drops
		if drops == "" {
			drops = "none"
		}
		m := func(s shares) string { return fmt.Sprintf("%.2f / %.2f / %.2f", s.min, s.med, s.max) }
		fmt.Fprintf(w, "| %s | %s | %.0f pkt/s, %.0f MB/s | %s | %s | %s | %.2f-%.2f | %s | %.3f (%.3f) | %d | %d | %s |\n",
			r.scenario, r.dir, r.pps, r.mbps, m(r.offered), m(r.sent), m(r.light), r.passMin, r.passMax,
			heavy, r.light.jain, r.all, r.light.belowHalf, r.light.zero, drops)
	}
}
