package conn

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fips-go/fips-go/conn/internal/streamframe"
)

// streamConn is one TCP (or TLS) connection of a Stream: a reader
// goroutine that hands the frames it finds to the Stream's receive
// function in chunks, and a writer goroutine that writes everything queued
// since its last write in one call.
type streamConn struct {
	s      *Stream
	ep     Endpoint    // owned by the reader once it runs
	proven atomic.Bool // the device sent to it, or we dialed it
	isTLS  atomic.Bool // TransportTLS: dialed so, or sniffed

	// Guarded by s.mu.
	key        connKey
	counted    bool      // counted in s.unproven
	failedAt   time.Time // closed: kept as a marker (see Stream.forget)
	inbound    bool      // accepted, not dialed
	viaProxy   bool      // dialed through an HTTP proxy
	proveTimer *time.Timer

	qmu   sync.Mutex // guards q, spare, held, nc, raw, bw, dead
	q     []byte     // frames waiting for the writer
	qn    int        // how many frames q holds
	spare []byte     // the writer's last buffer, reused for q
	held  int        // bytes of q, spare and the writer's buffer, in s.queued
	nc    net.Conn   // framed on; nil while dialing or sniffing
	raw   net.Conn   // the TCP connection under nc, once there is one
	bw    *batchConn // between a TLS nc and raw: gathers records; else nil
	dead  bool

	wake      chan struct{} // 1-buffered: q has something
	closed    chan struct{}
	closeOnce sync.Once
}

// newStreamConn makes a connection for k: dialing when raw is nil, else
// accepted (and not framed on until sniffed).
func newStreamConn(s *Stream, k connKey, raw net.Conn) *streamConn {
	c := &streamConn{
		s:      s,
		key:    k,
		ep:     Endpoint{Dst: k.dst, Transport: k.t},
		raw:    raw,
		wake:   make(chan struct{}, 1),
		closed: make(chan struct{}),
	}
	c.isTLS.Store(k.t == TransportTLS)
	return c
}

// enqueue frames bufs onto the queue; a frame that does not fit is dropped
// and counted.
func (c *streamConn) enqueue(bufs [][]byte) {
	var drops, bad, frames, bytes uint64
	c.qmu.Lock()
	if c.dead {
		c.qmu.Unlock()
		c.s.ctr.txNoConn.Add(uint64(len(bufs)))
		return
	}
	for _, b := range bufs {
		if len(b) == 0 || len(b) > streamframe.MaxPayload {
			bad++
			continue
		}
		need := len(c.q) + streamframe.Len(len(b))
		if need > c.s.opts.queueBytes {
			drops++
			continue
		}
		if need > cap(c.q) && !c.growLocked(need) {
			drops++
			continue
		}
		c.q, _ = streamframe.Append(c.q, b)
		c.qn++
		frames++
		bytes += uint64(len(b))
	}
	c.qmu.Unlock()
	if frames > 0 {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	c.s.ctr.txQueued(frames, bytes, drops, bad, c.isTLS.Load())
}

// growLocked replaces q with a larger buffer for need bytes, if the
// Stream's budget for all queues has room for the difference.
func (c *streamConn) growLocked(need int) bool {
	n := c.s.opts.queueCap(cap(c.q), need)
	more := n - cap(c.q)
	if c.s.queued.Add(int64(more)) > int64(c.s.opts.queueTotal) {
		c.s.queued.Add(-int64(more))
		return false
	}
	g := make([]byte, len(c.q), n)
	copy(g, c.q)
	c.q = g
	c.held += more
	return true
}

// dial connects a client-side connection (TLS when its transport says so,
// naming serverName), then serves it.
func (c *streamConn) dial(mark uint32, serverName string, proxy *url.URL) {
	defer c.s.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), c.s.opts.dialTimeout)
	go func() {
		select {
		case <-c.closed:
		case <-ctx.Done():
		}
		cancel()
	}()
	raw, err := c.s.dialVia(ctx, proxy, c.ep.Dst, mark)
	nc := raw
	var bw *batchConn
	if err == nil && c.ep.Transport == TransportTLS {
		bw = &batchConn{Conn: raw}
		nc, err = clientTLS(ctx, bw, serverName)
	}
	cancel()
	if err != nil {
		c.s.ctr.dialFailures.Add(1)
		c.s.opts.Logf("conn: stream dial %v (%v): %v", c.ep.Dst, c.ep.Transport, err)
		c.shut()
		c.s.forget(c, true)
		return
	}
	if !c.ready(nc, raw, bw) {
		return
	}
	c.proven.Store(true)
	c.s.ctr.connsDialed.Add(1)
	c.s.wg.Add(2)
	go c.readLoop()
	go c.writeLoop()
}

// shut closes the connection (or stops a dial); the goroutines end.
func (c *streamConn) shut() {
	c.closeOnce.Do(func() {
		c.qmu.Lock()
		c.dead = true
		nc := c.raw
		lost := c.qn
		c.q, c.qn, c.spare = nil, 0, nil
		c.s.queued.Add(-int64(c.held))
		c.held = 0
		c.qmu.Unlock()
		c.s.ctr.txNoConn.Add(uint64(lost))
		close(c.closed)
		if nc != nil {
			// Counted first: whoever sees the close sees it counted.
			c.s.ctr.connsClosed.Add(1)
			nc.Close()
		}
	})
}

// ready makes nc the connection frames are written to (raw under it,
// and bw between them when nc is TLS), and wakes the writer for what was
// queued meanwhile; false, with both closed, when c was shut first.
func (c *streamConn) ready(nc, raw net.Conn, bw *batchConn) bool {
	c.qmu.Lock()
	dead := c.dead
	if !dead {
		c.nc, c.raw, c.bw = nc, raw, bw
	}
	c.qmu.Unlock()
	if dead {
		nc.Close()
		raw.Close()
		return false
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return true
}

// closeFor shuts c and forgets it, counting why in reason (nil: the peer
// closed or the Stream did).
func (c *streamConn) closeFor(reason *atomic.Uint64) {
	if reason != nil {
		reason.Add(1)
	}
	c.shut()
	c.s.forget(c, false)
}

func (c *streamConn) unprovenTimeout() {
	if !c.proven.Load() {
		c.closeFor(&c.s.ctr.unprovenTimeouts)
	}
}

// writeLoop writes the queue as it fills, each time all of it in one call
// (over TLS, one call per tlsBatchBytes of records).
func (c *streamConn) writeLoop() {
	defer c.s.wg.Done()
	defer c.releaseBatch()
	for {
		select {
		case <-c.wake:
		case <-c.closed:
			return
		}
		buf, nc, bw := c.next()
		if len(buf) == 0 {
			continue // nothing queued, or still dialing: the queue waits
		}
		nc.SetWriteDeadline(time.Now().Add(c.s.opts.writeTimeout))
		err := write(nc, bw, buf)
		if err == nil {
			c.written(buf)
		}
		if err != nil {
			var reason *atomic.Uint64
			if errors.Is(err, os.ErrDeadlineExceeded) {
				reason = &c.s.ctr.writeTimeouts
			}
			c.closeFor(reason)
			return
		}
		c.s.ctr.txWrites.Add(1)
	}
}

// next takes the queued frames for the writer, leaving the queue the
// writer's spare buffer to fill meanwhile; nothing while the connection is
// still being dialed or sniffed.
func (c *streamConn) next() ([]byte, net.Conn, *batchConn) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	buf, nc := c.q, c.nc
	if nc == nil || len(buf) == 0 {
		// Left in place: swapping an empty queue for the spare would
		// drop a buffer and grow a new one from the start.
		return nil, nil, nil
	}
	c.q, c.spare, c.qn = c.spare[:0], nil, 0
	return buf, nc, c.bw
}

// write writes buf to nc; over TLS, bw gathers the records crypto/tls
// makes of it into as few TCP writes as its buffer allows.
func write(nc net.Conn, bw *batchConn, buf []byte) error {
	if bw == nil {
		_, err := nc.Write(buf)
		return err
	}
	bw.begin()
	_, err := nc.Write(buf)
	if ferr := bw.flush(); err == nil {
		err = ferr
	}
	return err
}

// releaseBatch drops the TLS batch buffer when the writer ends: a closed
// connection (a marker) holds no buffer.
func (c *streamConn) releaseBatch() {
	c.qmu.Lock()
	bw := c.bw
	c.qmu.Unlock()
	if bw != nil {
		bw.release()
	}
}

// written gives back the buffer next returned, once written, as the next
// spare.
func (c *streamConn) written(buf []byte) {
	c.qmu.Lock()
	if !c.dead { // a closed connection (a marker) holds no buffer
		c.spare = buf[:0]
	}
	c.qmu.Unlock()
}

// readLoop reads frames until the connection ends or misbehaves, handing
// them over a chunk at a time: the first frame blocks, the ones already
// buffered behind it join the same chunk.
func (c *streamConn) readLoop() {
	defer c.s.wg.Done()
	c.qmu.Lock()
	nc, raw := c.nc, c.raw
	c.qmu.Unlock()
	if nc == nil {
		if nc = c.sniffed(raw); nc == nil {
			return
		}
	}
	fr := streamframe.NewReader(nc)
	unproven := 0
	// over counts a frame from a connection still unproven and reports
	// whether it is one too many.
	over := func() bool {
		if c.proven.Load() {
			return false
		}
		unproven++
		return unproven > c.s.opts.unprovenFrames
	}
	for {
		p, err := fr.Next()
		if err != nil {
			c.readFailed(err)
			return
		}
		if over() {
			c.closeFor(&c.s.ctr.unprovenExcess)
			return
		}
		ch := c.s.rx.get()
		if ch == nil {
			c.closeFor(nil)
			return
		}
		ch.ep = c.ep
		ch.add(p)
		excess := false
		for !ch.full() && fr.Buffered() {
			if p, err = fr.Next(); err != nil {
				break
			}
			if excess = over(); excess {
				break
			}
			ch.add(p)
		}
		c.s.rx.put(ch)
		switch {
		case excess:
			c.closeFor(&c.s.ctr.unprovenExcess)
			return
		case err != nil:
			c.readFailed(err)
			return
		}
	}
}

func (c *streamConn) readFailed(err error) {
	switch {
	case errors.Is(err, streamframe.ErrEmpty):
		c.closeFor(&c.s.ctr.badFrames)
	case errors.Is(err, io.ErrUnexpectedEOF):
		c.closeFor(&c.s.ctr.badFrames)
	default:
		c.closeFor(nil)
	}
}

// sniffed finds out whether an accepted connection is plain or TLS and
// returns the connection to frame on, nil when it was closed instead.
func (c *streamConn) sniffed(raw net.Conn) net.Conn {
	bw := &batchConn{Conn: raw}
	nc, t, err := c.s.sniff(bw)
	if err != nil {
		c.sniffFailed(err)
		return nil
	}
	if t == TransportTLS {
		c.s.ctr.tlsAccepted.Add(1)
		c.s.refile(c, t)
		c.ep.Transport = t
		c.isTLS.Store(true)
	} else {
		bw = nil // the plain framing writes once per queue already
	}
	if !c.ready(nc, raw, bw) {
		return nil
	}
	return nc
}

// sniffFailed closes an accepted connection whose first bytes or TLS
// handshake did not arrive whole, counting why.
func (c *streamConn) sniffFailed(err error) {
	select {
	case <-c.closed: // the unproven timer or Close shut it, and counted
		return
	default:
	}
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, errTLSLimited): // the latter counted by sniff
		c.closeFor(nil)
	default:
		c.closeFor(&c.s.ctr.badFrames)
	}
}
