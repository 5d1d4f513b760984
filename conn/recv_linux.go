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
// arrival order for the next call.
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
	// A connected socket's receiver owns no GRO buffers: it borrows a set
	// from lend for one read and gives it back once every datagram of that
	// read is delivered, so a thousand idle connected sockets hold none.
	lend        *lazyList[groSet]
	set         *groSet
	quit        <-chan struct{} // closed with the socket: stop waiting to borrow
	gro         [][]byte
	held        []heldMsg
	next, nheld int
	// more: the last read found datagrams, so the socket likely holds
	// more and a connected socket's Wait skips its readiness check.
	more bool
	// ownGRO is how many GRO buffers a shared socket's receiver allocates
	// for itself, on its first read.
	ownGRO int
	// refused is the buffer size at which a datagram of this read was last
	// handed back unread (0: none since the last read or delivery):
	// datagrams too big for buffers no larger than that are dropped without
	// asking again.
	refused int

	// drops is the kernel's count of datagrams the socket dropped, as last
	// read at dropsAt (ns); see countDrops.
	drops   uint32
	dropsAt int64
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

// groSet is one borrowed set of GRO read buffers.
type groSet struct{ bufs [][]byte }

func newGROSet(n int) *groSet {
	return &groSet{bufs: groBuffers(n)}
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
	n := o.BatchSize
	if s.gro {
		n = o.GROBuffers
	}
	r := newReceiverArrays(s, n, st)
	if s.gro {
		// Allocated once the socket first has a datagram: the socket of
		// an address family nobody uses (often IPv6) then costs nothing.
		r.ownGRO = n
		r.held = make([]heldMsg, n)
	}
	return r
}

// newLendingReceiver is a connected socket's receiver: its reads never
// block (call.nonblock) and with GRO they borrow their buffers from lend.
func newLendingReceiver(s *udpSocket, o Options, st *counters, lend *lazyList[groSet], quit <-chan struct{}) *receiver {
	n := min(o.BatchSize, connDirectBatch)
	if s.gro {
		n = connGROBuffers
	}
	r := newReceiverArrays(s, n, st)
	r.call.nonblock = true
	r.quit = quit
	if s.gro {
		r.lend = lend
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

// countDrops adds what the kernel dropped at the socket's full receive
// buffer since it last looked, at a read at now (ns). Those datagrams
// never reach a read, so their count has to be asked for.
func (r *receiver) countDrops(now int64) {
	if now-r.dropsAt < int64(dropsEvery) {
		return
	}
	r.dropsAt = now
	if d, ok := socketDrops(r.sock.rc); ok {
		r.stats.rxSocketDrops.Add(uint64(d - r.drops))
		r.drops = d
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
	n := min(len(bufs), len(r.msgs))
	for {
		for i := range n {
			r.prepare(i, bufs[i])
		}
		got, err := r.call.recvmmsg(r.sock.rc, r.msgs[:n])
		r.forget(n)
		if err != nil {
			return 0, err
		}
		if got == 0 && r.call.nonblock {
			return 0, nil
		}
		now := time.Now().UnixNano()
		shed := r.sock.shed.Load()
		out, stale := 0, 0
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
		r.countDrops(now)
		if stale > 0 {
			r.stats.rxShedStale.Add(uint64(stale))
		}
		if out > 0 {
			return out, nil
		}
		if got > stale {
			return 0, ErrOversize
		}
	}
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
		got, err := r.readGRO()
		if err != nil {
			return 0, err
		}
		if got == 0 && r.call.nonblock {
			return 0, nil
		}
	}
}

// readGRO reads up to len(r.gro) messages into the GRO buffers and parses
// them into held, borrowing the buffers first if this receiver lends
// them. It must only run once held is empty.
func (r *receiver) readGRO() (int, error) {
	if r.lend != nil && r.set == nil && r.call.nonblock {
		// A connected socket read without Wait (its last read found
		// datagrams, so its caller read again at once) already holds the
		// caller's batch: waiting here for a set, while a reader that Wait
		// lent a set waits for a batch, deadlocked every connected
		// socket of a gateway with 1,000 active peers on a loaded machine
		// (their datagrams then sat unread in the kernel). Take a set only
		// if one is free; otherwise nothing now, and the caller's Wait
		// borrows one while it holds nothing.
		if r.set = r.lend.tryGet(); r.set == nil {
			return 0, nil
		}
		r.gro = r.set.bufs
	} else if !r.takeSet() {
		return 0, net.ErrClosed
	}
	for i := range r.gro {
		r.prepare(i, r.gro[i])
	}
	got, err := r.call.recvmmsg(r.sock.rc, r.msgs[:len(r.gro)])
	r.more = err == nil && got > 0
	if err != nil || got == 0 {
		r.next, r.nheld = 0, 0
		r.giveBack()
		return 0, err
	}
	r.next, r.nheld, r.refused = 0, 0, 0
	now := time.Now().UnixNano()
	shed := r.sock.shed.Load()
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
		r.held[r.nheld] = heldMsg{data: r.gro[i][:l], seg: seg, left: left, ep: ep}
		r.nheld++
	}
	r.stats.rxMessages.Add(uint64(got))
	r.countDrops(now)
	if r.nheld == 0 {
		r.giveBack()
	}
	return got, nil
}

// giveBack returns borrowed GRO buffers once nothing held points into
// them.
func (r *receiver) giveBack() {
	if r.set == nil || r.next < r.nheld {
		return
	}
	clear(r.held[:r.nheld])
	r.next, r.nheld = 0, 0
	r.lend.put(r.set)
	r.set, r.gro = nil, nil
}

// borrow takes a set of GRO buffers for the next read if this receiver
// lends and has none, waiting while every set is in use. False means the
// socket closed while it waited.
func (r *receiver) borrow() bool {
	if r.lend == nil {
		return true
	}
	r.tok <- struct{}{}
	defer r.release()
	return r.takeSet()
}

// takeSet makes sure the receiver has GRO buffers for a read: a shared
// socket's own, allocated once it is first readable, or a borrowed set if
// this receiver lends and has none. False
// means the socket closed while it waited. A reader that stops without
// giving its set back (its owner shutting down) costs the others nothing
// worse than this wait, which their own sockets' closing ends.
func (r *receiver) takeSet() bool {
	if r.lend == nil {
		if r.gro == nil {
			// A socket closed while we waited (the bind closing, or a
			// rebind replacing it) needs no buffers: the IPv6 socket of a
			// bind that never saw IPv6 would allocate its set only to
			// throw it away. Any other error says so again in the read.
			if err := r.call.waitReadable(r.sock.rc); errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed) {
				return false
			}
			r.gro = groBuffers(r.ownGRO)
		}
		return true
	}
	if r.set != nil {
		return true
	}
	r.set = r.lend.get(r.quit)
	if r.set == nil {
		return false
	}
	r.gro = r.set.bufs
	return true
}

// likelyMore reports whether the last read found datagrams.
func (r *receiver) likelyMore() bool {
	r.tok <- struct{}{}
	defer r.release()
	return r.more
}

// pending reports whether datagrams of an earlier read wait for a call.
func (r *receiver) pending() bool {
	r.tok <- struct{}{}
	defer r.release()
	return r.next < r.nheld
}

// drop forgets what is held (the socket closed) and returns borrowed
// buffers.
func (r *receiver) drop() {
	r.tok <- struct{}{}
	defer r.release()
	r.next = r.nheld
	r.giveBack()
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
		// Nothing held: keep the GRO set Wait just borrowed for the read
		// that comes next. Giving it back here sent that read to wait for
		// a set again, holding the caller's batch (see readGRO).
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
	r.giveBack()
	return out, false
}
