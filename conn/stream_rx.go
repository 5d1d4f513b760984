package conn

import (
	"sync"
	"sync/atomic"

	"github.com/fips-go/fips-go/conn/internal/streamframe"
)

const (
	// streamChunks is how many receive chunks a Stream has: the frames
	// read but not yet taken by its receive function. A reader that finds
	// none free waits, which stops it reading its TCP connection: the
	// sender's window closes instead of memory growing.
	streamChunks = 16
	// streamChunkBytes holds two of the largest frames, so a chunk with
	// one in it still has room for another; streamChunkFrames bounds the
	// frames of one chunk.
	streamChunkBytes  = 2 * streamframe.MaxPayload
	streamChunkFrames = 128
)

// rxChunk is frames one connection read in one go, for one endpoint.
type rxChunk struct {
	data []byte
	ends []int // end offset of each frame in data
	ep   Endpoint
}

func (c *rxChunk) add(p []byte) {
	c.data = append(c.data, p...)
	c.ends = append(c.ends, len(c.data))
}

// full reports whether a frame of the largest size might not fit.
func (c *rxChunk) full() bool {
	return len(c.ends) == streamChunkFrames || cap(c.data)-len(c.data) < streamframe.MaxPayload
}

// streamRx hands chunks from the connections' readers to the one receive
// function. The chunks are allocated on first use, so a Stream nobody
// connects to costs nothing.
type streamRx struct {
	done  <-chan struct{}
	once  sync.Once
	free  chan *rxChunk
	ready chan *rxChunk

	mu  sync.Mutex // guards cur and next: one receive call at a time
	cur *rxChunk
	idx int // next frame of cur
}

func (r *streamRx) init(done <-chan struct{}) {
	r.done = done
	r.free = make(chan *rxChunk, streamChunks)
	r.ready = make(chan *rxChunk, streamChunks)
}

func (r *streamRx) alloc() {
	for range streamChunks {
		r.free <- &rxChunk{
			data: make([]byte, 0, streamChunkBytes),
			ends: make([]int, 0, streamChunkFrames),
		}
	}
}

// get takes a free chunk, waiting while all are in use; nil once the
// Stream is closed.
func (r *streamRx) get() *rxChunk {
	r.once.Do(r.alloc)
	select {
	case c := <-r.free:
		c.data, c.ends = c.data[:0], c.ends[:0]
		return c
	case <-r.done:
		return nil
	}
}

// put hands a filled chunk to the receive function. It never blocks: the
// ready queue holds every chunk there is.
func (r *streamRx) put(c *rxChunk) { r.ready <- c }

func (r *streamRx) receive(ctr *streamCounters) ReceiveFunc {
	return func(bufs [][]byte, sizes []int, eps []Endpoint) (int, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for {
			if r.cur == nil {
				select {
				case r.cur = <-r.ready:
					r.idx = 0
				case <-r.done:
					return 0, ErrStreamClosed
				}
			}
			n, oversize := r.fill(bufs, sizes, eps, ctr)
			if n > 0 {
				return n, nil
			}
			if oversize > 0 {
				return 0, ErrOversize
			}
		}
	}
}

// fill copies frames from the current chunk and then any ready ones into
// bufs, without waiting.
func (r *streamRx) fill(bufs [][]byte, sizes []int, eps []Endpoint, ctr *streamCounters) (n, oversize int) {
	var bytes, tlsBytes uint64
	for n < len(bufs) && r.cur != nil {
		c := r.cur
		before := bytes
		for r.idx < len(c.ends) && n < len(bufs) {
			start := 0
			if r.idx > 0 {
				start = c.ends[r.idx-1]
			}
			f := c.data[start:c.ends[r.idx]]
			r.idx++
			if len(f) > len(bufs[n]) {
				oversize++
				continue
			}
			sizes[n] = copy(bufs[n], f)
			eps[n] = c.ep
			bytes += uint64(len(f))
			n++
		}
		if c.ep.Transport == TransportTLS {
			tlsBytes += bytes - before
		}
		if r.idx < len(c.ends) {
			break
		}
		r.free <- c
		r.cur = nil
		select {
		case r.cur = <-r.ready:
			r.idx = 0
		default:
		}
	}
	ctr.rxFrames.Add(uint64(n))
	ctr.rxBytes.Add(bytes)
	if tlsBytes > 0 {
		ctr.tlsRxBytes.Add(tlsBytes)
	}
	ctr.rxOversize.Add(uint64(oversize))
	return n, oversize
}

// streamCounters are a Stream's StreamStats as atomics.
type streamCounters struct {
	connsAccepted, connsDialed, connsClosed, connsRejected atomic.Uint64
	dialFailures, badFrames, unprovenTimeouts              atomic.Uint64
	unprovenExcess, writeTimeouts, tlsAccepted             atomic.Uint64
	tlsRxBytes, tlsTxBytes                                 atomic.Uint64
	rxFrames, rxBytes, rxOversize                          atomic.Uint64
	txFrames, txBytes, txWrites, txQueueDrops              atomic.Uint64
	txBad, txNoConn, tlsLimited                            atomic.Uint64
}

func (c *streamCounters) txQueued(frames, bytes, drops, bad uint64, tls bool) {
	if frames > 0 {
		c.txFrames.Add(frames)
		c.txBytes.Add(bytes)
		if tls {
			c.tlsTxBytes.Add(bytes)
		}
	}
	if drops > 0 {
		c.txQueueDrops.Add(drops)
	}
	if bad > 0 {
		c.txBad.Add(bad)
	}
}

// StreamStats are a Stream's counters; every field is cumulative.
type StreamStats struct {
	ConnsAccepted uint64 // connections accepted by the listener
	ConnsDialed   uint64 // connections dialed and established
	ConnsClosed   uint64 // connections closed, for any reason
	ConnsRejected uint64 // accepts (or dials) refused for a cap
	TLSAccepted   uint64 // accepted connections that were TLS
	// TLSLimited counts accepted TLS connections closed before their
	// handshake because their source began too many lately.
	TLSLimited   uint64
	DialFailures uint64
	// BadFrames counts connections closed for a zero-length frame or a
	// stream that ended inside a frame.
	BadFrames uint64
	// UnprovenTimeouts and UnprovenExcess count accepted connections
	// closed before the device sent to them: for time, and for frames.
	UnprovenTimeouts uint64
	UnprovenExcess   uint64
	// WriteTimeouts counts connections closed because the peer stopped
	// reading.
	WriteTimeouts uint64
	RxFrames      uint64
	RxBytes       uint64
	RxOversize    uint64 // frames larger than the receive buffers, dropped
	TxFrames      uint64 // frames queued for writing
	TxBytes       uint64 // their datagram bytes (framing not included)
	// TLSRxBytes and TLSTxBytes are the part of RxBytes and TxBytes that
	// went over TLS; the rest went over plain TCP.
	TLSRxBytes, TLSTxBytes uint64
	TxWrites               uint64 // write calls: TxFrames/TxWrites is the coalescing
	TxQueueDrops           uint64 // frames dropped because the connection's queue was full
	TxBad                  uint64 // empty or over-long datagrams, never sent
	TxNoConn               uint64 // frames dropped with no connection to send them on
}

// Stats returns the counters.
func (s *Stream) Stats() StreamStats {
	c := &s.ctr
	return StreamStats{
		ConnsAccepted: c.connsAccepted.Load(), ConnsDialed: c.connsDialed.Load(),
		ConnsClosed: c.connsClosed.Load(), ConnsRejected: c.connsRejected.Load(),
		TLSAccepted: c.tlsAccepted.Load(), TLSLimited: c.tlsLimited.Load(),
		TLSRxBytes: c.tlsRxBytes.Load(), TLSTxBytes: c.tlsTxBytes.Load(),
		DialFailures: c.dialFailures.Load(), BadFrames: c.badFrames.Load(),
		UnprovenTimeouts: c.unprovenTimeouts.Load(), UnprovenExcess: c.unprovenExcess.Load(),
		WriteTimeouts: c.writeTimeouts.Load(),
		RxFrames:      c.rxFrames.Load(), RxBytes: c.rxBytes.Load(), RxOversize: c.rxOversize.Load(),
		TxFrames: c.txFrames.Load(), TxBytes: c.txBytes.Load(), TxWrites: c.txWrites.Load(),
		TxQueueDrops: c.txQueueDrops.Load(), TxBad: c.txBad.Load(), TxNoConn: c.txNoConn.Load(),
	}
}
