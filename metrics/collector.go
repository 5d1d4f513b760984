// Package metrics exports a device's counters and per-peer traffic in the
// Prometheus text format, read afresh on each scrape so the data path pays
// nothing for it.
//
// The exposition is written with github.com/VictoriaMetrics/metrics rather
// than the conventional github.com/prometheus/client_golang: linking
// client_golang (and the protobuf runtime it pulls in) cost every fips-go
// daemon 3.2 MiB of RSS and 3.8 MB of binary, whether or not --metrics was
// given, against a 16 MiB RSS target; VictoriaMetrics/metrics costs 0.3 MiB
// and 0.1 MB (measured on an idle daemon, both beside net/http).
package metrics

import (
	"io"
	"strings"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/fips-go/fips-go/device"
)

// DefaultMaxPeers is the number of peers above which per-peer series are
// left out: 1,000 peers make about 3,000 series, more than most Prometheus
// setups want from one target.
const DefaultMaxPeers = 1000

// Source is the device as the collector reads it; *device.Device is one.
type Source interface {
	Stats(maxPeers int) device.Stats
}

// Options tune a Collector. The zero value works.
type Options struct {
	// Interface is the value of the interface label every series carries.
	Interface string
	// MaxPeers: per-peer series are exported while the device has at most
	// this many peers (0: DefaultMaxPeers; negative: never).
	MaxPeers int
	// Now is the clock handshake ages are measured with (nil: time.Now).
	Now func() time.Time
}

// Collector writes one device's metrics. Its metric families follow the
// device's counters: a counter the device adds later is exported without
// a change here.
type Collector struct {
	src  Source
	opts Options
}

// NewCollector returns a collector that reads src on every scrape.
func NewCollector(src Source, opts Options) *Collector {
	if opts.MaxPeers == 0 {
		opts.MaxPeers = DefaultMaxPeers
	}
	if opts.MaxPeers < 0 {
		opts.MaxPeers = -1
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Collector{src: src, opts: opts}
}

// WritePrometheus reads the device once and writes every series, sorted,
// with one HELP and TYPE line per family (metadata must be on, see
// Handler).
func (c *Collector) WritePrometheus(w io.Writer) {
	st := c.src.Stats(c.opts.MaxPeers)
	e := exposition{set: vm.NewSet(), seen: map[string]bool{}, iface: escapeLabel(c.opts.Interface)}
	stages, sojourns, counters := splitSojourn(st.Counters)
	for _, ctr := range counters {
		family, labels := counterFamily(ctr.Name)
		e.counter(family, ctr.Value, labels...)
	}
	e.gauge("fipsgo_peers", float64(st.Peers))
	e.gauge("fipsgo_peer_series_limit", float64(max(c.opts.MaxPeers, 0)))
	e.gauge("fipsgo_received_bytes", float64(st.RxBytes))
	e.gauge("fipsgo_sent_bytes", float64(st.TxBytes))
	omitted := 0
	if st.PeerStats == nil {
		omitted = st.Peers
	}
	e.gauge("fipsgo_peers_omitted", float64(omitted))
	q := st.Queues
	e.gauge("fipsgo_pool_batches", float64(q.Batches), "pool", "full")
	e.gauge("fipsgo_pool_batches", float64(q.SmallBatches), "pool", "small")
	e.gauge("fipsgo_pool_batches_in_use", float64(q.BatchesInUse), "pool", "full")
	e.gauge("fipsgo_pool_batches_in_use", float64(q.SmallBatchesInUse), "pool", "small")
	e.gauge("fipsgo_handshake_queue_length", float64(q.HandshakeQueue), "queue", "anonymous")
	e.gauge("fipsgo_handshake_queue_length", float64(q.HandshakePriority), "queue", "priority")
	e.gauge("fipsgo_handshake_queue_capacity", float64(q.HandshakeQueueCap), "queue", "anonymous")
	e.gauge("fipsgo_handshake_queue_capacity", float64(q.HandshakePriorityCap), "queue", "priority")
	e.gauge("fipsgo_tx_queued_packets", float64(q.TxQueued))
	now := c.opts.Now()
	for i := range st.PeerStats {
		ps := &st.PeerStats[i]
		key := ps.PublicKey.String() // base64: nothing to escape
		e.counter("fipsgo_peer_received_bytes_total", ps.RxBytes, "peer", key)
		e.counter("fipsgo_peer_sent_bytes_total", ps.TxBytes, "peer", key)
		e.counter("fipsgo_peer_keepalives_sent_total", ps.KeepalivesSent, "peer", key)
		e.counter("fipsgo_peer_endpoint_changes_total", ps.EndpointChanges, "peer", key)
		e.gauge("fipsgo_peer_tx_queued_packets", float64(ps.TxQueued), "peer", key)
		if !ps.LastHandshake.IsZero() {
			e.gauge("fipsgo_peer_last_handshake_age_seconds", max(now.Sub(ps.LastHandshake).Seconds(), 0), "peer", key)
		}
	}
	e.set.WritePrometheus(w)
	writeSojourn(w, e.iface, stages, sojourns)
}

// exposition is one scrape's set of series.
type exposition struct {
	set   *vm.Set
	seen  map[string]bool // the library panics on a duplicate; skip them
	iface string          // escaped
}

func (e *exposition) name(family string, labels []string) (string, bool) {
	var b strings.Builder
	b.WriteString(family)
	b.WriteString(`{interface="` + e.iface + `"`)
	for i := 0; i+1 < len(labels); i += 2 {
		b.WriteString("," + labels[i] + `="` + escapeLabel(labels[i+1]) + `"`)
	}
	b.WriteString("}")
	n := b.String()
	if e.seen[n] {
		return "", false
	}
	e.seen[n] = true
	return n, true
}

func (e *exposition) counter(family string, v uint64, labels ...string) {
	if n, ok := e.name(family, labels); ok {
		e.set.NewCounter(n).Set(v)
	}
}

func (e *exposition) gauge(family string, v float64, labels ...string) {
	if n, ok := e.name(family, labels); ok {
		e.set.NewGauge(n, func() float64 { return v })
	}
}

// counterFamily maps a device counter to its metric: "rx_drop_REASON" and
// "tx_drop_REASON" become fipsgo_dropped_packets_total{direction, reason};
// any other NAME becomes fipsgo_NAME_total.
func counterFamily(name string) (string, []string) {
	name = sanitize(name)
	for _, dir := range []string{"rx", "tx"} {
		if reason, ok := strings.CutPrefix(name, dir+"_drop_"); ok {
			return "fipsgo_dropped_packets_total", []string{"direction", dir, "reason", reason}
		}
	}
	return "fipsgo_" + strings.TrimSuffix(name, "_total") + "_total", nil
}

// sanitize keeps a counter name a valid metric-name part.
func sanitize(name string) string {
	if name == "" {
		return "unnamed"
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, name)
}

// labelEscaper escapes a label value as the text format wants.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escapeLabel(s string) string {
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	return labelEscaper.Replace(s)
}
