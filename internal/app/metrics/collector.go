// Package metrics exports a device's counters and per-peer traffic in the
// Prometheus text format on a small HTTP endpoint, read afresh on each
// scrape so the data path pays nothing for it.
//
// The text format, the go_* and process_* series and the HTTP/1.1 server
// are written here rather than taken from net/http and a metrics library
// (github.com/VictoriaMetrics/metrics until now, prometheus/client_golang
// before it): linking net/http, with the crypto/tls, x509 and HTTP/2
// tables it brings, and the library cost every fips-go daemon about
// 3 MiB of RSS in file-backed pages (a loaded tunnel's peak, 18.3 against
// 15.2 MiB without them), whether or not --metrics was given, against a
// 16 MiB target. A scrape endpoint needs one request, GET /metrics, which
// a few hundred lines serve; request heads are parsed by internal/app/http1,
// which the HTTP proxy shares.
package metrics

import (
	"io"
	"strings"
	"time"

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
	// Extra, when set, adds series read on every scrape (the rootless
	// exit's flows and refusals), each family named fipsgo_NAME, with
	// the interface label.
	Extra func() []Sample
}

// Sample is one series of Options.Extra. Labels are name, value pairs.
type Sample struct {
	Name, Help string
	Gauge      bool
	Labels     []string
	Value      uint64
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

// WritePrometheus reads the device once and writes every series in the
// Prometheus text format, families sorted by name, each with one HELP and
// TYPE line. An error of w ends the writing.
func (c *Collector) WritePrometheus(w io.Writer) {
	st := c.src.Stats(c.opts.MaxPeers)
	e := newExposition()
	iface := labels("", "interface", c.opts.Interface)
	stages, sojourns, counters := splitSojourn(st.Counters)
	for _, ctr := range counters {
		family, kv := counterFamily(ctr.Name)
		e.counter(family, counterHelp(family, ctr.Name), ctr.Value, labels(iface, kv...))
	}
	e.gauge("fipsgo_peers", "Configured peers.", float64(st.Peers), iface)
	e.gauge("fipsgo_peer_series_limit", "Per-peer series are exported up to this many peers (--metrics-max-peers).", float64(max(c.opts.MaxPeers, 0)), iface)
	e.gauge("fipsgo_received_bytes", "Bytes received, summed over the configured peers.", float64(st.RxBytes), iface)
	e.gauge("fipsgo_sent_bytes", "Bytes sent, summed over the configured peers.", float64(st.TxBytes), iface)
	omitted := 0
	if st.PeerStats == nil {
		omitted = st.Peers
	}
	e.gauge("fipsgo_peers_omitted", "Peers whose series were left out because the device has more than the limit.", float64(omitted), iface)
	c.queues(e, iface, &st.Queues)
	now := c.opts.Now()
	for i := range st.PeerStats {
		ps := &st.PeerStats[i]
		l := labels(iface, "peer", ps.PublicKey.String())
		e.counter("fipsgo_peer_received_bytes_total", "Bytes received from the peer.", ps.RxBytes, l)
		e.counter("fipsgo_peer_sent_bytes_total", "Bytes sent to the peer.", ps.TxBytes, l)
		e.counter("fipsgo_peer_keepalives_sent_total", "Keepalives sent to the peer.", ps.KeepalivesSent, l)
		e.counter("fipsgo_peer_endpoint_changes_total", "Times the peer's endpoint moved.", ps.EndpointChanges, l)
		e.gauge("fipsgo_peer_tx_queued_packets", "Outbound packets to the peer queued for the crypto workers or being sent.", float64(ps.TxQueued), l)
		if ps.PathMTU > 0 {
			e.gauge("fipsgo_peer_path_mtu_bytes", "Largest datagram the path to the peer is known to carry, by how it was learned.",
				float64(ps.PathMTU), labels(iface, "peer", ps.PublicKey.String(), "source", ps.PathMTUSource))
		}
		if !ps.LastHandshake.IsZero() {
			e.gauge("fipsgo_peer_last_handshake_age_seconds", "Seconds since the peer's last handshake.", max(now.Sub(ps.LastHandshake).Seconds(), 0), l)
		}
	}
	addSojourn(e, iface, stages, sojourns)
	if c.opts.Extra != nil {
		for _, x := range c.opts.Extra() {
			name := "fipsgo_" + sanitize(x.Name)
			if x.Gauge {
				e.gauge(name, x.Help, float64(x.Value), labels(iface, x.Labels...))
			} else {
				e.counter(strings.TrimSuffix(name, "_total")+"_total", x.Help, x.Value, labels(iface, x.Labels...))
			}
		}
	}
	e.writeTo(w)
}

func (c *Collector) queues(e *exposition, iface string, q *device.QueueStats) {
	const (
		batches = "Batches in the pool (full: 128 packets a batch, small: 4)."
		inUse   = "Batches of the pool out right now."
		hsLen   = "Handshake messages waiting in the queue."
		hsCap   = "Capacity of the handshake queue."
	)
	full, small := labels(iface, "pool", "full"), labels(iface, "pool", "small")
	anon, prio := labels(iface, "queue", "anonymous"), labels(iface, "queue", "priority")
	e.gauge("fipsgo_pool_batches", batches, float64(q.Batches), full)
	e.gauge("fipsgo_pool_batches", batches, float64(q.SmallBatches), small)
	e.gauge("fipsgo_pool_batches_in_use", inUse, float64(q.BatchesInUse), full)
	e.gauge("fipsgo_pool_batches_in_use", inUse, float64(q.SmallBatchesInUse), small)
	e.gauge("fipsgo_handshake_queue_length", hsLen, float64(q.HandshakeQueue), anon)
	e.gauge("fipsgo_handshake_queue_length", hsLen, float64(q.HandshakePriority), prio)
	e.gauge("fipsgo_handshake_queue_capacity", hsCap, float64(q.HandshakeQueueCap), anon)
	e.gauge("fipsgo_handshake_queue_capacity", hsCap, float64(q.HandshakePriorityCap), prio)
	e.gauge("fipsgo_tx_queued_packets", "Outbound packets queued for the crypto workers or being sent.", float64(q.TxQueued), iface)
}

// counterHelp is the HELP text of a device counter's family; a family
// takes the text of its first counter.
func counterHelp(family, name string) string {
	if family == dropFamily {
		return "Packets dropped, by direction (rx: from the network, tx: from the TUN) and reason."
	}
	return "The device counter " + sanitize(name) + " (fips-go show)."
}

// counterFamily maps a device counter to its metric: "rx_drop_REASON" and
// "tx_drop_REASON" become fipsgo_dropped_packets_total{direction, reason};
// any other NAME becomes fipsgo_NAME_total.
const dropFamily = "fipsgo_dropped_packets_total"

func counterFamily(name string) (string, []string) {
	name = sanitize(name)
	for _, dir := range []string{"rx", "tx"} {
		if reason, ok := strings.CutPrefix(name, dir+"_drop_"); ok {
			return dropFamily, []string{"direction", dir, "reason", reason}
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
