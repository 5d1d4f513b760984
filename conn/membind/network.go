// Package membind is an in-memory UDP network for tests: binds that
// implement conn.Bind and exchange datagrams through a Network that can
// lose, duplicate, delay and reorder them, reproducibly for a given seed.
package membind

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// NetOptions configure a Network. The zero value is a perfect network.
type NetOptions struct {
	// Loss, Duplicate and Reorder are per-datagram probabilities in [0, 1].
	// A reordered datagram is held back and delivered right after the next
	// datagram to the same bind (or, if its receiver runs dry first, when
	// the receiver looks for more).
	Loss, Duplicate, Reorder float64
	// Delay is added to every datagram's delivery (the same for all, so
	// delay alone never reorders).
	Delay time.Duration
	// Seed makes the loss, duplicate and reorder decisions reproducible:
	// they are a function of the seed and the order of sends.
	Seed int64
	// QueueLen bounds each bind's receive queue in datagrams (default
	// 1024); a datagram arriving at a full queue is dropped and counted.
	QueueLen int
	// BatchSize is what the binds report as conn.Bind.BatchSize (default
	// 128).
	BatchSize int
	// Tap, if set, sees every datagram handed to the network, before any
	// fault applies, as an on-path observer would: tests capture traffic
	// with it to replay or alter. data is a copy the tap may keep. It is
	// called with the network's lock held and must not send.
	Tap func(from, to netip.AddrPort, data []byte)
}

// NetStats count what the network did to the datagrams it carried.
type NetStats struct {
	Sent       uint64 // datagrams handed to the network
	Lost       uint64 // dropped by the Loss probability
	Duplicated uint64 // delivered twice
	Reordered  uint64 // delivered after a datagram sent later
	QueueDrops uint64 // dropped at a full receive queue
	Unroutable uint64 // no bind at the destination address and port
}

// Network connects Binds by address and port.
type Network struct {
	opts NetOptions

	// mu guards rng, routes and nextPort. Lock order: Bind.mu, then
	// Network.mu, then queue.mu.
	mu       sync.Mutex
	rng      *rand.Rand
	routes   map[netip.AddrPort]*queue
	nextPort uint16

	sent, lost, duplicated, reordered, queueDrops, unroutable atomic.Uint64
}

const (
	defaultQueueLen  = 1024
	defaultBatchSize = 128
	// Ports handed out for Open(0) start in the ephemeral range like a
	// kernel's, so tests that print them look familiar.
	firstPickedPort = 49152
)

// NewNetwork returns an empty network. Probabilities outside [0, 1] are
// clamped.
func NewNetwork(opts NetOptions) *Network {
	clamp := func(p float64) float64 { return min(max(p, 0), 1) }
	opts.Loss, opts.Duplicate, opts.Reorder = clamp(opts.Loss), clamp(opts.Duplicate), clamp(opts.Reorder)
	if opts.QueueLen <= 0 {
		opts.QueueLen = defaultQueueLen
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = defaultBatchSize
	}
	seed := uint64(opts.Seed)
	return &Network{
		opts:     opts,
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		routes:   make(map[netip.AddrPort]*queue),
		nextPort: firstPickedPort,
	}
}

// Stats returns the network's counters.
func (n *Network) Stats() NetStats {
	return NetStats{
		Sent:       n.sent.Load(),
		Lost:       n.lost.Load(),
		Duplicated: n.duplicated.Load(),
		Reordered:  n.reordered.Load(),
		QueueDrops: n.queueDrops.Load(),
		Unroutable: n.unroutable.Load(),
	}
}

// register routes ap to q. Port 0 picks a free port. Called with the
// bind's lock held.
func (n *Network) register(addr netip.Addr, port uint16, q *queue) (uint16, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if port == 0 {
		const span = 1<<16 - 1024
		for i := range span {
			p := uint16(1024 + (int(n.nextPort)-1024+i)%span)
			if _, used := n.routes[netip.AddrPortFrom(addr, p)]; !used {
				port = p
				break
			}
		}
		if port == 0 {
			return 0, fmt.Errorf("membind: no free port on %v: %w", addr, syscall.EADDRINUSE)
		}
		n.nextPort = port + 1
		if n.nextPort < 1024 {
			n.nextPort = 1024
		}
	}
	ap := netip.AddrPortFrom(addr, port)
	if _, used := n.routes[ap]; used {
		return 0, fmt.Errorf("membind: listen %v: %w", ap, syscall.EADDRINUSE)
	}
	n.routes[ap] = q
	return port, nil
}

// move reroutes q from old to new, failing if new is taken.
func (n *Network) move(old, new netip.AddrPort, q *queue) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, used := n.routes[new]; used {
		return fmt.Errorf("membind: move to %v: %w", new, syscall.EADDRINUSE)
	}
	if n.routes[old] == q {
		delete(n.routes, old)
	}
	n.routes[new] = q
	return nil
}

// unregister removes ap if it still routes to q.
func (n *Network) unregister(ap netip.AddrPort, q *queue) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.routes[ap] == q {
		delete(n.routes, ap)
	}
}

// deliver carries one datagram from -> to, applying the network's faults.
// The three random draws happen for every datagram, in the same order,
// so one decision never shifts the others.
func (n *Network) deliver(from, to netip.AddrPort, data []byte) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sent.Add(1)
	if n.opts.Tap != nil {
		n.opts.Tap(from, to, append([]byte(nil), data...))
	}
	lose := n.rng.Float64() < n.opts.Loss
	dup := n.rng.Float64() < n.opts.Duplicate
	hold := n.rng.Float64() < n.opts.Reorder
	if lose {
		n.lost.Add(1)
		return
	}
	q := n.routes[to]
	if q == nil {
		n.unroutable.Add(1)
		return
	}
	p := packet{data: append([]byte(nil), data...), from: from, to: to.Addr()}
	if n.opts.Delay > 0 {
		p.at = time.Now().Add(n.opts.Delay)
	}
	q.push(p, hold, n)
	if dup {
		n.duplicated.Add(1)
		q.push(p, false, n)
	}
}
