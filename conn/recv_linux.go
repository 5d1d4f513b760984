package conn

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// receiver is the state behind one socket's ReceiveFunc: the recvmmsg
// arrays, and with UDP_GRO the 64 KiB buffers coalesced messages land in
// plus what is left of them after a call. Its memory is fixed at open. One
// call runs at a time (tok), which keeps the leftovers of a GRO read in
// arrival order for the next call. The connected sockets' reader
// (connReader) uses one receiver for all of them, with no socket of its
// own (sock nil): it names the socket on each read.
type receiver struct {
	sock  *udpSocket
	stats *counters
	tok   chan struct{} // capacity 1; full while a call runs
	call  *mmsgCall
	msgs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names []sockaddrBuf
	ctrl  []byte // rxCtrlSpace per message

	// With GRO only: gro are the read buffers; held[next:nheld] are parsed
	// messages that still have datagrams for the caller.
	gro         [][]byte
	held        []heldMsg
	next, nheld int
	// ownGRO is how many GRO buffers the receiver allocates, on its first
	// read.
	ownGRO int
	// refused is the buffer size at which a datagram of this read was last
	// handed back unread (0: none since the last read or delivery):
	// datagrams too big for buffers no larger than that are dropped without
	// asking again.
	refused int
}

// heldMsg is a coalesced message being split: data is what is left of it,
// seg the size of each datagram in it (the last may be shorter), left how
// many datagrams remain (a zero-length datagram is one too), and ep the
// endpoint every one of them shares.
type heldMsg struct {
	data []byte
	seg  int
	left int
	ep   Endpoint
}

// groBuffers carves n 64 KiB read buffers out of one allocation.
func groBuffers(n int) [][]byte {
	backing := make([]byte, n*groBufferSize)
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = backing[i*groBufferSize : (i+1)*groBufferSize : (i+1)*groBufferSize]
	}
	return bufs
}

func newReceiver(s *udpSocket, o Options, st *counters) *receiver {
	n := o.batchSize
	if s.gro {
		n = o.groBuffers
	}
	r := newReceiverArrays(s, n, st)
	if s.gro {
		r.ownGRO = n // allocated by ensureGRO
		r.held = make([]heldMsg, n)
	}
	return r
}

func newReceiverArrays(s *udpSocket, n int, st *counters) *receiver {
	r := &receiver{
		sock:  s,
		stats: st,
		tok:   make(chan struct{}, 1),
		call:  newMmsgCall(),
		msgs:  make([]unix.Mmsghdr, n),
		iovs:  make([]unix.Iovec, n),
		names: make([]sockaddrBuf, n),
		ctrl:  make([]byte, n*rxCtrlSpace),
	}
	for i := range r.msgs {
		h := &r.msgs[i].Hdr
		h.Name = &r.names[i][0]
		h.Iov = &r.iovs[i]
		h.SetIovlen(1)
		h.Control = &r.ctrl[i*rxCtrlSpace]
	}
	return r
}

// receive is the ReceiveFunc.
func (r *receiver) receive(bufs [][]byte, sizes []int, eps []Endpoint) (int, error) {
	n := min(len(bufs), len(sizes), len(eps))
	if n == 0 {
		return 0, nil
	}
	r.tok <- struct{}{}
	defer r.release()
	if r.held != nil {
		return r.receiveGRO(bufs[:n], sizes, eps)
	}
	return r.receiveDirect(bufs[:n], sizes, eps)
}

func (r *receiver) release() { <-r.tok }

// prepare readies message i to read into buf. The kernel overwrites the
// name and control lengths and the flags on every read, and a control
// buffer must be zero before it is reused: a stale UDP_GRO message left in
// it would split the next datagram at a wrong size.
func (r *receiver) prepare(i int, buf []byte) {
	r.iovs[i].Base = nil
	if len(buf) > 0 {
		r.iovs[i].Base = &buf[0]
	}
	r.iovs[i].SetLen(len(buf))
	h := &r.msgs[i].Hdr
	h.Namelen = uint32(len(sockaddrBuf{}))
	clear(r.ctrl[i*rxCtrlSpace : (i+1)*rxCtrlSpace])
	h.SetControllen(rxCtrlSpace)
	h.Flags = 0
	r.msgs[i].Len = 0
}

// decode reads the peer and control of message i after a read. ok false
// means drop it; the reason is counted.
func (r *receiver) decode(i int) (ep Endpoint, seg int, rxTime int64, ok bool) {
	h := &r.msgs[i].Hdr
	if h.Flags&unix.MSG_TRUNC != 0 {
		r.stats.rxOversize.Add(1)
		return Endpoint{}, 0, 0, false
	}
	if h.Flags&unix.MSG_CTRUNC != 0 {
		r.stats.rxBadControl.Add(1)
		return Endpoint{}, 0, 0, false
	}
	dst, ok := parseSockaddr(r.names[i][:min(int(h.Namelen), len(sockaddrBuf{}))])
	if !ok {
		r.stats.rxBadControl.Add(1)
		return Endpoint{}, 0, 0, false
	}
	ctl := r.ctrl[i*rxCtrlSpace : (i+1)*rxCtrlSpace]
	c, err := parseControl(ctl[:min(int(h.Controllen), len(ctl))])
	if err != nil {
		r.stats.rxBadControl.Add(1)
		return Endpoint{}, 0, 0, false
	}
	ep = Endpoint{
		Dst:        netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port()),
		Src:        c.src.Unmap(),
		SrcIfIndex: c.ifIndex,
	}
	return ep, c.segSize, c.rxTime, true
}

// observe counts the socket sojourn of n datagrams the kernel received at
// rxTime (0: no timestamp) and that a read returned at now.
func (r *receiver) observe(now, rxTime int64, n int) {
	if rxTime != 0 {
		r.stats.rxSojourn.ObserveN(time.Duration(now-rxTime), uint64(n))
	}
}

// dropsEvery paces countDrops: one getsockopt per socket at most this
// often, and only while reads go on.
const dropsEvery = 50 * time.Millisecond

// countDrops adds what the kernel dropped at s's full receive buffer since
// it last looked, at a read at now (ns). Those datagrams never reach a
// read, so their count has to be asked for. Only s's reader calls it.
func (r *receiver) countDrops(s *udpSocket, now int64) {
	if now-s.dropsAt < int64(dropsEvery) {
		return
	}
	s.dropsAt = now
	if d, ok := socketDrops(s.rc); ok {
		r.stats.rxSocketDrops.Add(uint64(d - s.drops))
		s.drops = d
	}
}

// forget drops the references the iovecs hold to the caller's buffers.
func (r *receiver) forget(n int) {
	for i := range n {
		r.iovs[i].Base = nil
	}
}

// receiveDirect reads datagrams straight into the caller's buffers: without
// GRO every message is one datagram, so there is nothing to split.
func (r *receiver) receiveDirect(bufs [][]byte, sizes []int, eps []Endpoint) (int, error) {
	for {
		out, got, stale, err := r.readDirect(r.sock, bufs, sizes, eps)
		if err != nil {
			return 0, err
		}
		if out > 0 {
			return out, nil
		}
		if got > stale {
			return 0, ErrOversize
		}
	}
}

// readDirect is one recvmmsg on s into bufs (at most len(r.msgs) of them).
// It returns how many datagrams it delivered (out, packed at the front of
// bufs), how many messages it read (got) and how many of those it dropped
// for their age while shedding (stale); the rest of got less out were
// dropped for their size or control data, and counted.
func (r *receiver) readDirect(s *udpSocket, bufs [][]byte, sizes []int, eps []Endpoint) (out, got, stale int, err error) {
	n := min(len(bufs), len(r.msgs))
	for i := range n {
		r.prepare(i, bufs[i])
	}
	got, err = r.call.recvmmsg(s.rc, r.msgs[:n])
	r.forget(n)
	if err != nil || got == 0 {
		return 0, 0, 0, err
	}
	now := time.Now().UnixNano()
	shed := s.shed.Load()
	for i := range got {
		ep, _, rxTime, ok := r.decode(i)
		if !ok {
			continue
		}
		if shed && tooOld(now, rxTime) {
			stale++
			continue
		}
		r.observe(now, rxTime, 1)
		l := int(r.msgs[i].Len)
		if out != i {
			// Rare: only after a dropped message. Keep the batch dense.
			copy(bufs[out], bufs[i][:l])
		}
		sizes[out], eps[out] = l, ep
		out++
	}
	r.stats.rxMessages.Add(uint64(got))
	r.stats.rxPackets.Add(uint64(out))
	r.countDrops(s, now)
	if stale > 0 {
		r.stats.rxShedStale.Add(uint64(stale))
	}
	return out, got, stale, nil
}

// tooOld reports whether a datagram the kernel received at rxTime (0: no
// timestamp) waited longer than ShedMaxAge before a read at now.
func tooOld(now, rxTime int64) bool {
	return rxTime != 0 && now-rxTime > int64(ShedMaxAge)
}

// receiveGRO hands out the datagrams left from the last read and reads
// again only when none are left, so one recvmmsg of coalesced messages can
// feed several calls.
func (r *receiver) receiveGRO(bufs [][]byte, sizes []int, eps []Endpoint) (int, error) {
	for {
		out, refused := r.drain(bufs, sizes, eps)
		if out > 0 {
			return out, nil
		}
		if refused {
			return 0, ErrOversize
		}
		if !r.ensureGRO() {
			return 0, net.ErrClosed
		}
		r.next, r.nheld = 0, 0
		if _, err := r.readGRO(r.sock, 0, len(r.gro)); err != nil {
			return 0, err
		}
	}
}

// readGRO is one recvmmsg on s of up to n messages into r.gro[first:],
// parsed and appended to held. Every buffer from first on must be free:
// held holds no more messages than the buffers before first. A read
// that finds messages resets refused.
func (r *receiver) readGRO(s *udpSocket, first, n int) (int, error) {
	n = min(n, len(r.gro)-first, len(r.msgs))
	for i := range n {
		r.prepare(i, r.gro[first+i])
	}
	got, err := r.call.recvmmsg(s.rc, r.msgs[:n])
	if err != nil || got == 0 {
		return 0, err
	}
	r.refused = 0
	now := time.Now().UnixNano()
	shed := s.shed.Load()
	for i := range got {
		ep, seg, rxTime, ok := r.decode(i)
		if !ok {
			continue
		}
		l := int(r.msgs[i].Len)
		left := 1
		if seg > 0 && l > seg {
			left = (l + seg - 1) / seg
		} else {
			seg = l
		}
		if shed && tooOld(now, rxTime) {
			r.stats.rxShedStale.Add(uint64(left))
			continue
		}
		r.observe(now, rxTime, left)
		r.held[r.nheld] = heldMsg{data: r.gro[first+i][:l], seg: seg, left: left, ep: ep}
		r.nheld++
	}
	r.stats.rxMessages.Add(uint64(got))
	r.countDrops(s, now)
	return got, nil
}

// ensureGRO allocates the GRO buffers once the socket is first readable:
// the socket of an address family nobody uses (often IPv6) then costs
// nothing. False means the socket closed while it waited (the bind
// closing, or a rebind replacing it), which needs no buffers; any other
// error says so again in the read.
func (r *receiver) ensureGRO() bool {
	if r.gro != nil {
		return true
	}
	if err := r.call.waitReadable(r.sock.rc); errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed) {
		return false
	}
	r.gro = groBuffers(r.ownGRO)
	return true
}

// drain copies held datagrams into bufs in order, each with its message's
// endpoint (so every segment of a coalesced read keeps the destination
// address the peer wrote to). It returns how many it delivered. A datagram
// that does not fit its buffer is first handed back unread (refused true,
// nothing delivered), since the caller's buffers may predate an MTU raise
// and it can come back with larger ones; if it comes back with buffers no
// larger, the datagram is dropped and counted, never truncated.
func (r *receiver) drain(bufs [][]byte, sizes []int, eps []Endpoint) (n int, refused bool) {
	if r.next >= r.nheld {
		return 0, false
	}
	out := 0
	var oversize uint64
	for out < len(bufs) && r.next < r.nheld {
		h := &r.held[r.next]
		l := min(h.seg, len(h.data))
		fits := l <= len(bufs[out])
		if !fits && out > 0 {
			break // deliver these; the caller comes back for the big one
		}
		if !fits && len(bufs[0]) > r.refused {
			r.refused = len(bufs[0])
			return 0, true
		}
		if fits {
			r.refused = 0
		}
		d := h.data[:l]
		h.data = h.data[l:]
		if h.left--; h.left == 0 {
			r.next++
		}
		if !fits {
			oversize++
			continue
		}
		sizes[out] = copy(bufs[out], d)
		eps[out] = h.ep
		out++
	}
	if oversize > 0 {
		r.stats.rxOversize.Add(oversize)
	}
	r.stats.rxPackets.Add(uint64(out))
	return out, false
}
