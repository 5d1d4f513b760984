package device

import (
	"net/netip"
	"time"

	"github.com/fips-go/fips-go/device/noise"
)

// PeerStats is one peer's traffic figures for the metrics endpoint: what
// Status holds minus keys and allowed IPs, so a scrape of 10,000 peers
// neither walks the allowed-IPs trie nor copies secrets.
type PeerStats struct {
	PublicKey        noise.PublicKey
	Endpoint         netip.AddrPort // zero when unknown
	RxBytes, TxBytes uint64
	LastHandshake    time.Time // zero when none
	// LastInitiation is when this side last sent a handshake initiation
	// (zero: never); one later than LastHandshake is still unanswered.
	LastInitiation time.Time
	// KeepalivesSent and EndpointChanges count since the peer was added.
	KeepalivesSent, EndpointChanges uint64
	// TxQueued is the outbound packets queued for the crypto workers or
	// being sent.
	TxQueued int
	// PathMTU is the largest datagram the path to the peer's endpoint is
	// known to carry (0: unknown) and PathMTUSource how it was learned.
	PathMTU       int
	PathMTUSource string // "kernel" or "probe"; "unknown" with PathMTU 0
}

// QueueStats are the device's queues and pools as a scrape sees them.
type QueueStats struct {
	// Batches and SmallBatches are the pools' sizes, and the InUse
	// fields how many of their batches are out (read, queued, sealing,
	// sending) right now.
	Batches, BatchesInUse           int
	SmallBatches, SmallBatchesInUse int
	// HandshakeQueue and HandshakePriority are the messages waiting in the
	// anonymous and the priority handshake queue, of HandshakeQueueCap and
	// HandshakePriorityCap.
	HandshakeQueue, HandshakeQueueCap       int
	HandshakePriority, HandshakePriorityCap int
	// TxQueued sums the peers' TxQueued.
	TxQueued int
}

// Stats is a scrape's read-only view of the device.
type Stats struct {
	// Counters are the same counters Status carries, in the same order.
	Counters []Counter
	// Peers is the number of configured peers.
	Peers int
	// RxBytes and TxBytes sum the configured peers' transfer (a peer's
	// figures leave the sum when it is removed).
	RxBytes, TxBytes uint64
	// PeerStats has one entry per peer, in no particular order, when
	// Peers <= the maxPeers asked for; otherwise it is nil.
	PeerStats []PeerStats
	// Queues are the queue depths and pool use.
	Queues QueueStats
}

// Stats reads the counters and, for at most maxPeers peers, their traffic.
// It takes each lock briefly and allocates only the result, so a scrape
// does not hold up the data path.
func (d *Device) Stats(maxPeers int) Stats {
	d.peersMu.RLock()
	peers := make([]*Peer, 0, len(d.peers))
	for _, p := range d.peers {
		peers = append(peers, p)
	}
	d.peersMu.RUnlock()
	st := Stats{Counters: d.counterSnapshot(), Peers: len(peers), Queues: d.queueStats()}
	detail := len(peers) <= maxPeers
	if detail {
		st.PeerStats = make([]PeerStats, 0, len(peers))
	}
	for _, p := range peers {
		rx, tx := p.rxBytes.Load(), p.txBytes.Load()
		st.RxBytes += rx
		st.TxBytes += tx
		queued := 0
		if t := p.live.Load(); t != nil {
			queued = int(t.queued.Load())
		}
		st.Queues.TxQueued += queued
		if !detail {
			continue
		}
		ps := PeerStats{PublicKey: p.pub, RxBytes: rx, TxBytes: tx, TxQueued: queued,
			KeepalivesSent: p.keepalives.Load(), EndpointChanges: p.epChanges.Load(),
		}
		path, src := p.pathMTU()
		ps.PathMTU, ps.PathMTUSource = path, src.String()
		if ep, ok := p.endpoint(); ok {
			ps.Endpoint = ep.Dst
		}
		p.mu.Lock()
		ps.LastHandshake, ps.LastInitiation = p.lastHSAt, p.lastInitAt
		p.mu.Unlock()
		st.PeerStats = append(st.PeerStats, ps)
	}
	return st
}

// queueStats reads the pools' and handshake queues' fill levels; each is
// one channel length, so the figures are a moment's and may not add up.
func (d *Device) queueStats() QueueStats {
	ps := d.pools.Load()
	return QueueStats{
		Batches:              cap(ps.full.tokens),
		BatchesInUse:         ps.full.inUse(),
		SmallBatches:         cap(ps.small.tokens),
		SmallBatchesInUse:    ps.small.inUse(),
		HandshakeQueue:       len(d.flood.hsq.q),
		HandshakeQueueCap:    cap(d.flood.hsq.q),
		HandshakePriority:    len(d.flood.hsqPrio.q),
		HandshakePriorityCap: cap(d.flood.hsqPrio.q),
	}
}
