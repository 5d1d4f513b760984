package conn

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// connReader reads every connected socket of one Open through a single
// ReceiveFunc, so the goroutines reading them are as many as call it (the
// device runs one), not one per socket.
//
// The sockets sit in an epoll instance of their own, edge-triggered; that
// epoll descriptor is itself in Go's poller (os.NewFile on a non-blocking
// epoll fd), so a caller with nothing to read parks in the runtime like
// any socket reader, and closing it wakes the caller. A call collects the
// sockets epoll reports ready into a ring and serves the ring in turns:
// each ready socket gets one non-blocking recvmmsg of at most
// connGROBuffers coalesced messages (connDirectBatch datagrams without
// GRO) per turn and goes to the back of the ring while its reads come back
// full; a socket whose read comes back short is drained and leaves the
// ring until epoll reports it again. One busy peer therefore gets one
// turn in as many as there are ready sockets, and a read stops once it
// has the caller's batch, so the next call starts with the sockets that
// did not get a turn.
//
// Closing a socket while a call may be reading it is safe because the
// reader never names a socket by its descriptor number: epoll's events
// carry a slot and a generation (a slot reused by a later socket has a
// new one), the ring holds the sockets themselves, and every system call
// on a socket goes through its RawConn, which holds the descriptor open
// until the call returns (Close then finishes the close), so a descriptor
// number a new socket reuses is never read as the old one. A socket
// closed while it waits in the ring leaves it at once (gone).
type connReader struct {
	stats *counters
	epf   *os.File // the epoll instance, in Go's poller
	eprc  syscall.RawConn
	gro   bool // read into GRO buffers and split (else into the caller's)

	// mu guards slots, free, gen, the ring (head, tail) and every
	// registered socket's slot, gen, inRing, prev, next and gone. It is
	// taken under connTable.mu and LinuxBind.mu, never the other way.
	mu         sync.Mutex
	slots      []*connSocket // registered sockets by slot; nil: free
	free       []uint32      // free slots below len(slots)
	gen        uint32        // the last generation handed out
	head, tail *connSocket   // the ready sockets, in turn order
	nready     int           // how many

	// The rest belongs to the one running call (tok).
	tok    chan struct{}
	r      *receiver // arrays, GRO buffers and held datagrams for all sockets
	events []unix.EpollEvent
	nev    int
	errno  syscall.Errno
	block  bool // wait in the poller when epoll has nothing
	rounds int  // rounds since the last look at epoll
	waitFn func(fd uintptr) bool
}

const (
	// connEvents is how many epoll events one look takes; more ready
	// sockets are picked up by the next look.
	connEvents = 128
	// connPollEvery is how often, in read rounds, the reader looks for
	// newly ready sockets while some are still in the ring: a look is a
	// system call, too costly for every round. A socket that becomes
	// ready waits at most that many rounds for its turn.
	connPollEvery = 4
)

// newConnReader opens the epoll instance and checks that Go's poller
// took it (an epoll fd is pollable; a kernel that refused would leave the
// reader spinning, so connected sockets stay off then).
func newConnReader(o Options, st *counters) (*connReader, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("fcntl", err)
	}
	f := os.NewFile(uintptr(fd), "conn-epoll")
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		f.Close()
		return nil, fmt.Errorf("conn: epoll instance not pollable: %w", err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	gro := !o.DisableGRO
	n := min(o.batchSize, connDirectBatch)
	if gro {
		n = o.groBuffers
	}
	r := newReceiverArrays(nil, n, st)
	r.call.nonblock = true
	if gro {
		r.ownGRO = n // allocated one by one as rounds reach them
		r.held = make([]heldMsg, n)
	}
	c := &connReader{
		stats:  st,
		epf:    f,
		eprc:   rc,
		gro:    gro,
		tok:    make(chan struct{}, 1),
		r:      r,
		events: make([]unix.EpollEvent, connEvents),
	}
	c.waitFn = c.wait
	return c, nil
}

// register adds cs to the epoll instance. Datagrams queued before it are
// reported too: epoll checks readiness when a socket is added.
func (c *connReader) register(cs *connSocket) error {
	c.mu.Lock()
	if n := len(c.free); n > 0 {
		cs.slot = c.free[n-1]
		c.free = c.free[:n-1]
	} else {
		cs.slot = uint32(len(c.slots))
		c.slots = append(c.slots, nil)
	}
	c.gen++
	cs.gen = c.gen
	c.slots[cs.slot] = cs
	c.mu.Unlock()
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: int32(cs.slot), Pad: int32(cs.gen)}
	if err := c.ctl(unix.EPOLL_CTL_ADD, cs, &ev); err != nil {
		c.unregister(cs)
		return fmt.Errorf("conn: epoll add: %w", err)
	}
	return nil
}

// unregister takes cs out of the ring and the slot table, then out of the
// epoll instance (its descriptor still open: the caller closes it after).
// An event for it already read lands on a free or newer slot and is
// ignored.
func (c *connReader) unregister(cs *connSocket) {
	c.mu.Lock()
	if cs.gone {
		c.mu.Unlock()
		return
	}
	cs.gone = true
	c.unlink(cs)
	if c.slots[cs.slot] == cs {
		c.slots[cs.slot] = nil
		c.free = append(c.free, cs.slot)
	}
	c.mu.Unlock()
	_ = c.ctl(unix.EPOLL_CTL_DEL, cs, &unix.EpollEvent{}) // fails only if the bind closed the epoll first
}

// ctl runs epoll_ctl with both descriptors held open.
func (c *connReader) ctl(op int, cs *connSocket, ev *unix.EpollEvent) error {
	var err error
	serr := cs.sock.rc.Control(func(sfd uintptr) {
		if e := c.eprc.Control(func(efd uintptr) { err = unix.EpollCtl(int(efd), op, int(sfd), ev) }); e != nil {
			err = e
		}
	})
	return errors.Join(serr, err)
}

// close closes the epoll instance; a call waiting in it returns
// ErrBindClosed. The sockets are closed before.
func (c *connReader) close() { c.epf.Close() }

// receive is the ReceiveFunc of every connected socket: it blocks until a
// connected socket has datagrams and returns ErrBindClosed once the bind
// closes or reopens. An errno a socket reports instead of a datagram (an
// ICMP error on a connected socket, cleared by reporting it) concerns
// that socket alone and is not returned.
func (c *connReader) receive(bufs [][]byte, sizes []int, eps []Endpoint) (int, error) {
	n := min(len(bufs), len(sizes), len(eps))
	if n == 0 {
		return 0, nil
	}
	bufs = bufs[:n]
	c.tok <- struct{}{}
	defer func() { <-c.tok }()
	for {
		if c.gro {
			out, refused := c.r.drain(bufs, sizes, eps)
			if out > 0 {
				return out, nil
			}
			if refused {
				return 0, ErrOversize
			}
		}
		if err := c.poll(); err != nil {
			return 0, err
		}
		if c.gro {
			c.roundGRO(n)
			continue
		}
		out, oversize := c.roundDirect(bufs, sizes, eps)
		if out > 0 {
			return out, nil
		}
		if oversize {
			return 0, ErrOversize
		}
	}
}

// poll adds the sockets epoll reports ready to the ring, waiting in Go's
// poller while the ring is empty. It looks even when the ring is not,
// every connPollEvery rounds, so that sockets that become ready get their
// turn among busy ones.
func (c *connReader) poll() error {
	c.mu.Lock()
	c.block = c.head == nil
	c.mu.Unlock()
	if !c.block && c.rounds < connPollEvery-1 {
		c.rounds++
		return nil
	}
	c.rounds = 0
	c.nev, c.errno = 0, 0
	if err := c.eprc.Read(c.waitFn); err != nil {
		return ErrBindClosed
	}
	if c.errno != 0 {
		return fmt.Errorf("%w: %w", ErrBindClosed, os.NewSyscallError("epoll_wait", c.errno))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ev := range c.events[:c.nev] {
		slot, gen := uint32(ev.Fd), uint32(ev.Pad)
		if slot >= uint32(len(c.slots)) {
			continue
		}
		if cs := c.slots[slot]; cs != nil && cs.gen == gen && !cs.inRing {
			c.push(cs)
		}
	}
	return nil
}

// wait is the poller's callback: one epoll_pwait that does not sleep
// (raw, as the socket calls are: see mmsgCall.do). False asks the poller
// to park the caller until the epoll instance is readable.
func (c *connReader) wait(fd uintptr) bool {
	for {
		n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, fd, uintptr(unsafe.Pointer(&c.events[0])), uintptr(len(c.events)), 0, 0, 0)
		switch e {
		case unix.EINTR:
			continue
		case 0:
			c.nev = int(n)
			return n > 0 || !c.block
		}
		c.errno = e
		return true
	}
}

// roundGRO reads the ready sockets in turn into the GRO buffers until
// they are used up, the held datagrams fill a batch of want, or every
// socket ready at the start had its turn. Nothing may be held.
func (c *connReader) roundGRO(want int) {
	r := c.r
	if r.gro == nil {
		r.gro = make([][]byte, r.ownGRO)
	}
	r.next, r.nheld = 0, 0
	used, datagrams := 0, 0
	for turns := c.ready(); turns > 0 && used < len(r.gro) && datagrams < want; turns-- {
		cs := c.pop()
		if cs == nil {
			return
		}
		q := min(connGROBuffers, len(r.gro)-used)
		for i := used; i < used+q; i++ {
			if r.gro[i] == nil {
				// Each buffer is made the first time a round gets this
				// far: one busy peer only ever uses the first two.
				r.gro[i] = make([]byte, groBufferSize)
			}
		}
		before := r.nheld
		got, err := r.readGRO(cs.sock, used, q)
		used += got
		for _, h := range r.held[before:r.nheld] {
			datagrams += h.left
		}
		c.after(cs, got == q, err)
	}
}

// roundDirect is roundGRO without GRO: each turn reads into the caller's
// buffers, after what earlier turns delivered. oversize reports a turn
// that found only datagrams too big for them.
func (c *connReader) roundDirect(bufs [][]byte, sizes []int, eps []Endpoint) (out int, oversize bool) {
	for turns := c.ready(); turns > 0 && out < len(bufs); turns-- {
		cs := c.pop()
		if cs == nil {
			break
		}
		// A turn reads at most what the arrays hold (BatchSize, up to
		// connDirectBatch): got == q must mean a full read.
		q := min(len(c.r.msgs), len(bufs)-out)
		o, got, stale, err := c.r.readDirect(cs.sock, bufs[out:out+q], sizes[out:], eps[out:])
		out += o
		if o == 0 && got > stale {
			oversize = true
		}
		c.after(cs, got == q, err)
	}
	return out, oversize
}

// after puts cs back at the end of the ring when its read came back full
// (it likely holds more). A short read drained it: epoll reports it
// again when a datagram arrives. A socket errno (an ICMP error; reading
// cleared it) gets the socket one more turn, for the datagrams that may
// be queued behind it; a second in a row, nothing, so that a socket stuck
// in an error cannot spin the reader. A closed socket leaves.
func (c *connReader) after(cs *connSocket, full bool, err error) {
	again := full
	switch {
	case err == nil:
		cs.errs = 0
	case socketErrno(err):
		cs.errs++
		again = cs.errs < 2
	default:
		again = false
	}
	if !again {
		return
	}
	c.mu.Lock()
	if !cs.gone && !cs.inRing {
		c.push(cs)
	}
	c.mu.Unlock()
}

// ready is how many sockets are in the ring.
func (c *connReader) ready() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nready
}

// pop takes the socket whose turn it is, nil when none is ready.
func (c *connReader) pop() *connSocket {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs := c.head
	if cs != nil {
		c.unlink(cs)
	}
	return cs
}

// push appends cs to the ring; mu is held.
func (c *connReader) push(cs *connSocket) {
	cs.inRing, cs.prev, cs.next = true, c.tail, nil
	if c.tail != nil {
		c.tail.next = cs
	} else {
		c.head = cs
	}
	c.tail = cs
	c.nready++
}

// unlink takes cs out of the ring if it is in it; mu is held.
func (c *connReader) unlink(cs *connSocket) {
	if !cs.inRing {
		return
	}
	if cs.prev != nil {
		cs.prev.next = cs.next
	} else {
		c.head = cs.next
	}
	if cs.next != nil {
		cs.next.prev = cs.prev
	} else {
		c.tail = cs.prev
	}
	cs.inRing, cs.prev, cs.next = false, nil, nil
	c.nready--
}
