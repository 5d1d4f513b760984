package showfmt

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/fips-go/fips-go/device"
)

// WatchOptions tune FormatWatch. The zero value works.
type WatchOptions struct {
	// MaxPeers is the number of peer rows shown, busiest first (0: 40).
	MaxPeers int
}

// FormatWatch writes one frame of `fips-go show IFACE --watch`: per peer
// the receive and send rates since prev, taken dt before cur, busiest
// first; then the drops per second by reason. With a zero prev (the first
// frame) rates show as "-". Packets per second are not shown: neither the
// UAPI nor fips-go's counters count packets per peer.
func FormatWatch(w io.Writer, iface string, prev, cur device.Status, dt time.Duration, now time.Time, opts WatchOptions) error {
	if opts.MaxPeers <= 0 {
		opts.MaxPeers = 40
	}
	first := prev.Peers == nil && prev.Counters == nil || dt <= 0
	secs := dt.Seconds()
	rows := watchRows(prev, cur, secs, first)
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "interface: %s  peers: %d  rx %s  tx %s Mbit/s", iface, len(cur.Peers),
		total(rows, first, func(r watchRow) float64 { return r.rx }), total(rows, first, func(r watchRow) float64 { return r.tx }))
	// Packets are counted per device, not per peer (fips-go daemons only).
	if rx, ok := counterRate(prev, cur, "rx_packets", secs, first); ok {
		tx, _ := counterRate(prev, cur, "tx_packets", secs, first)
		fmt.Fprintf(bw, "  rx %s  tx %s packets/s", rx, tx)
	}
	bw.WriteString("\n\n")
	fmt.Fprintf(bw, "%-44s  %-22s  %10s  %10s  %s\n", "peer", "endpoint", "rx Mbit/s", "tx Mbit/s", "handshake")
	for i, r := range rows {
		if i == opts.MaxPeers {
			fmt.Fprintf(bw, "(%d more peers)\n", len(rows)-i)
			break
		}
		ep := "(none)"
		if r.ps.Endpoint.IsValid() {
			ep = r.ps.Endpoint.String()
		}
		hs := "never"
		if !r.ps.LastHandshake.IsZero() {
			hs = max(now.Sub(r.ps.LastHandshake).Round(time.Second), 0).String() + " ago"
		}
		fmt.Fprintf(bw, "%-44s  %-22s  %10s  %10s  %s\n", r.ps.PublicKey.String(), ep, rate(r.rx, first), rate(r.tx, first), hs)
	}
	bw.WriteString("\ndrops/s: " + dropRates(prev, cur, secs, first) + "\n")
	return bw.Flush()
}

type watchRow struct {
	ps     *device.PeerStatus
	rx, tx float64 // Mbit/s
}

// watchRows pairs each peer with its previous sample and sorts busiest
// first (then by key, so quiet peers keep their places).
func watchRows(prev, cur device.Status, secs float64, first bool) []watchRow {
	before := make(map[[32]byte]*device.PeerStatus, len(prev.Peers))
	for i := range prev.Peers {
		before[prev.Peers[i].PublicKey] = &prev.Peers[i]
	}
	rows := make([]watchRow, 0, len(cur.Peers))
	for i := range cur.Peers {
		ps := &cur.Peers[i]
		r := watchRow{ps: ps}
		if p, ok := before[ps.PublicKey]; ok && !first {
			r.rx = mbits(p.RxBytes, ps.RxBytes, secs)
			r.tx = mbits(p.TxBytes, ps.TxBytes, secs)
		}
		rows = append(rows, r)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i].rx+rows[i].tx, rows[j].rx+rows[j].tx
		if a != b {
			return a > b
		}
		return rows[i].ps.PublicKey.String() < rows[j].ps.PublicKey.String()
	})
	return rows
}

// mbits is the rate between two byte counts; a count that went down (the
// peer was removed and added again) counts from zero.
func mbits(before, after uint64, secs float64) float64 {
	if after < before {
		before = 0
	}
	return float64(after-before) * 8 / secs / 1e6
}

func rate(v float64, first bool) string {
	if first {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

func total(rows []watchRow, first bool, f func(watchRow) float64) string {
	var sum float64
	for _, r := range rows {
		sum += f(r)
	}
	return rate(sum, first)
}

// dropRates lists the drop counters that moved, per second, largest first.
// counterRate is a counter's rate between two samples, "-" on the first;
// false when the daemon has no such counter.
func counterRate(prev, cur device.Status, name string, secs float64, first bool) (string, bool) {
	var was, is uint64
	found := false
	for _, c := range cur.Counters {
		if c.Name == name {
			is, found = c.Value, true
		}
	}
	for _, c := range prev.Counters {
		if c.Name == name {
			was = c.Value
		}
	}
	if !found {
		return "", false
	}
	if first || is < was {
		return "-", true
	}
	return fmt.Sprintf("%.0f", float64(is-was)/secs), true
}

func dropRates(prev, cur device.Status, secs float64, first bool) string {
	if first {
		return "-"
	}
	before := map[string]uint64{}
	for _, c := range prev.Counters {
		before[c.Name] = c.Value
	}
	type drop struct {
		name string
		rate float64
	}
	var drops []drop
	for _, c := range cur.Counters {
		if !strings.Contains(c.Name, "_drop_") || c.Value <= before[c.Name] {
			continue
		}
		drops = append(drops, drop{c.Name, float64(c.Value-before[c.Name]) / secs})
	}
	if len(drops) == 0 {
		return "none"
	}
	sort.SliceStable(drops, func(i, j int) bool { return drops[i].rate > drops[j].rate })
	parts := make([]string, len(drops))
	for i, d := range drops {
		parts[i] = fmt.Sprintf("%s %.1f", d.name, d.rate)
	}
	return strings.Join(parts, ", ")
}
