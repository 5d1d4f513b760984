package membind

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fips-go/fips-go/conn"
)

// Bind is one host's UDP port on a Network. It has a single local address
// and so a single receive function.
type Bind struct {
	net *Network

	// mu guards addr, port, mark and q (nil when closed).
	mu   sync.Mutex
	addr netip.Addr
	port uint16
	mark uint32
	q    *queue

	rxOversize, stickyFallback, sendErrors atomic.Uint64
	rxPackets, rxMessages                  atomic.Uint64
	txPackets, txMessages                  atomic.Uint64
}

var (
	_ conn.Bind      = (*Bind)(nil)
	_ conn.StatsBind = (*Bind)(nil)
)

// NewBind returns a closed bind that will listen on addr (IPv4-mapped
// addresses are unmapped).
func (n *Network) NewBind(addr netip.Addr) *Bind {
	return &Bind{net: n, addr: addr.Unmap()}
}

// Open implements conn.Bind: it registers addr:port on the network.
func (b *Bind) Open(port uint16) ([]conn.ReceiveFunc, uint16, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.q != nil {
		return nil, 0, conn.ErrBindOpen
	}
	q := newQueue(b.net.opts.QueueLen)
	actual, err := b.net.register(b.addr, port, q)
	if err != nil {
		return nil, 0, err
	}
	b.q, b.port = q, actual
	return []conn.ReceiveFunc{func(bufs [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
		return b.receive(q, bufs, sizes, eps)
	}}, actual, nil
}

// Close implements conn.Bind.
func (b *Bind) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.q == nil {
		return nil
	}
	b.net.unregister(netip.AddrPortFrom(b.addr, b.port), b.q)
	b.q.close()
	b.q = nil
	return nil
}

// SetAddr moves the bind to a new local address, as when a host roams:
// datagrams to the old address stop arriving, and replies that ask for the
// old address as their sticky source leave from the new one instead.
func (b *Bind) SetAddr(addr netip.Addr) error {
	addr = addr.Unmap()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.q != nil {
		old, new := netip.AddrPortFrom(b.addr, b.port), netip.AddrPortFrom(addr, b.port)
		if err := b.net.move(old, new, b.q); err != nil {
			return err
		}
	}
	b.addr = addr
	return nil
}

// AddrPort is the local address and the port (0 until opened).
func (b *Bind) AddrPort() netip.AddrPort {
	b.mu.Lock()
	defer b.mu.Unlock()
	return netip.AddrPortFrom(b.addr, b.port)
}

// SetMark implements conn.Bind. There is no routing to steer in memory, so
// the mark is only remembered (see Mark).
func (b *Bind) SetMark(mark uint32) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mark = mark
	return nil
}

// Mark is the last mark set with SetMark.
func (b *Bind) Mark() uint32 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mark
}

// BatchSize implements conn.Bind.
func (b *Bind) BatchSize() int { return b.net.opts.BatchSize }

// Stats implements conn.StatsBind.
func (b *Bind) Stats() conn.Stats {
	return conn.Stats{
		RxOversize:     b.rxOversize.Load(),
		StickyFallback: b.stickyFallback.Load(),
		SendErrors:     b.sendErrors.Load(),
		RxPackets:      b.rxPackets.Load(),
		RxMessages:     b.rxMessages.Load(),
		TxPackets:      b.txPackets.Load(),
		TxMessages:     b.txMessages.Load(),
	}
}

// Send implements conn.Bind. Like a kernel, it falls back to the bind's
// current address when ep.Src names one the bind no longer has.
func (b *Bind) Send(bufs [][]byte, ep conn.Endpoint) error {
	b.mu.Lock()
	open, from := b.q != nil, netip.AddrPortFrom(b.addr, b.port)
	b.mu.Unlock()
	if !open {
		return conn.ErrBindClosed
	}
	dst := netip.AddrPortFrom(ep.Dst.Addr().Unmap(), ep.Dst.Port())
	if !dst.Addr().IsValid() || dst.Port() == 0 {
		b.sendErrors.Add(1)
		return fmt.Errorf("membind: send to invalid endpoint %v", ep.Dst)
	}
	if dst.Addr().Is4() != from.Addr().Is4() {
		b.sendErrors.Add(1)
		return fmt.Errorf("membind: send from %v to %v: address families differ", from.Addr(), dst)
	}
	if src := ep.Src.Unmap(); src.IsValid() && src != from.Addr() {
		b.stickyFallback.Add(1)
	}
	for _, buf := range bufs {
		b.net.deliver(from, dst, buf)
	}
	b.txPackets.Add(uint64(len(bufs)))
	b.txMessages.Add(uint64(len(bufs)))
	return nil
}

// errClosed is what a receive function returns once its bind is closed.
var errClosed = fmt.Errorf("membind: %w", net.ErrClosed)

// receive is the ReceiveFunc of the Open that made q.
func (b *Bind) receive(q *queue, bufs [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
	n := min(len(bufs), len(sizes), len(eps))
	if n == 0 {
		return 0, nil
	}
	for {
		out, wait, dropped, err := b.take(q, bufs[:n], sizes, eps)
		if out > 0 || err != nil {
			return out, err
		}
		if dropped {
			return 0, conn.ErrOversize
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-q.done:
			}
			t.Stop()
			continue
		}
		select {
		case <-q.notify:
		case <-q.done:
		}
	}
}

// take moves ready datagrams into bufs. With none ready it returns how
// long until the head is due (0 when the queue is empty); dropped says a
// datagram too big for its buffer was dropped.
func (b *Bind) take(q *queue, bufs [][]byte, sizes []int, eps []conn.Endpoint) (out int, wait time.Duration, dropped bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return 0, 0, false, errClosed
	}
	if q.n == 0 && q.hasHeld {
		// Nothing came after the held datagram; do not strand it.
		q.enqueue(q.held, b.net)
		q.held, q.hasHeld = packet{}, false
	}
	now := time.Time{}
	for out < len(bufs) && q.n > 0 {
		p := q.ring[q.head]
		if !p.at.IsZero() {
			if now.IsZero() {
				now = time.Now()
			}
			if d := p.at.Sub(now); d > 0 {
				if out == 0 {
					return 0, d, dropped, nil
				}
				break
			}
		}
		q.pop()
		b.rxMessages.Add(1)
		if len(p.data) > len(bufs[out]) {
			b.rxOversize.Add(1)
			dropped = true
			continue
		}
		sizes[out] = copy(bufs[out], p.data)
		eps[out] = conn.Endpoint{Dst: p.from, Src: p.to}
		out++
	}
	b.rxPackets.Add(uint64(out))
	return out, 0, dropped, nil
}
