package conn

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
)

// LinuxBind is the batched Linux bind: an IPv4 and an IPv6 socket on one
// port, recvmmsg/sendmmsg, UDP_GRO on receive, UDP_SEGMENT on send, and
// sticky source addresses through IP_PKTINFO/IPV6_PKTINFO.
type LinuxBind struct {
	opts     Options
	stats    counters
	sendPool *freeList[sendScratch]

	// mu serializes Open, Close, SetMark and Shed, and guards mark and
	// shed.
	mu   sync.Mutex
	mark uint32
	shed bool // see Shedder; sockets opened while it is set start shed
	// state is the open sockets, nil when closed. Send and the receivers
	// load it without mu so Close never waits for a Send that is blocked
	// on a full socket: closing the socket is what unblocks it.
	state atomic.Pointer[linuxState]
}

// linuxState is one Open's sockets; either may be nil when its address
// family is unavailable, never both.
type linuxState struct {
	v4, v6 *udpSocket
	port   uint16
	// connected holds the connected sockets (connsock_linux.go); nil when
	// they are off or SO_REUSEPORT could not be set.
	connected *connTable
}

var (
	_ Bind        = (*LinuxBind)(nil)
	_ StatsBind   = (*LinuxBind)(nil)
	_ ConnectBind = (*LinuxBind)(nil)
	_ Shedder     = (*LinuxBind)(nil)
)

// NewLinux returns a closed Linux bind.
func NewLinux(opts Options) *LinuxBind {
	o := opts.withDefaults()
	// Each concurrent Send holds one scratch; beyond that Sends wait.
	return &LinuxBind{
		opts:     o,
		sendPool: newFreeList(o.maxConcurrentSends, func() *sendScratch { return newSendScratch(o.batchSize) }),
	}
}

func newDefault(opts Options) Bind { return NewLinux(opts) }

// Open implements Bind. It returns the IPv4 receive function first.
func (b *LinuxBind) Open(port uint16) ([]ReceiveFunc, uint16, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state.Load() != nil {
		return nil, 0, ErrBindOpen
	}
	c4, c6, actual, err := listenPair(port, b.opts.Logf)
	if err != nil {
		return nil, 0, err
	}
	st := &linuxState{port: actual}
	if st.v4, err = b.socket(c4, false); err == nil {
		st.v6, err = b.socket(c6, true)
	}
	if err != nil {
		for _, c := range [...]*net.UDPConn{c6, c4} {
			if c != nil {
				c.Close()
			}
		}
		return nil, 0, err
	}
	st.connected = b.newConnTable(st)
	if b.shed {
		b.shedSockets(st, true)
	}
	var fns []ReceiveFunc
	for _, s := range [...]*udpSocket{st.v4, st.v6} {
		if s != nil {
			fns = append(fns, newReceiver(s, b.opts, &b.stats).receive)
		}
	}
	b.state.Store(st)
	return fns, actual, nil
}

// socket sets up c, which may be nil when its family is unavailable.
func (b *LinuxBind) socket(c *net.UDPConn, v6 bool) (*udpSocket, error) {
	if c == nil {
		return nil, nil
	}
	return newUDPSocket(c, v6, b.opts, b.mark, &b.stats)
}

// Close implements Bind. Closing the sockets makes blocked receivers and
// Sends return errors wrapping net.ErrClosed.
func (b *LinuxBind) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.state.Swap(nil)
	if st == nil {
		return nil
	}
	return st.closeSockets()
}

// SetMark implements Bind.
func (b *LinuxBind) SetMark(mark uint32) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.mark
	b.mark = mark
	st := b.state.Load()
	if st == nil || (mark == 0 && old == 0) {
		// Setting SO_MARK needs CAP_NET_ADMIN even for 0; skip the no-op.
		return nil
	}
	var errs []error
	for _, s := range [...]*udpSocket{st.v4, st.v6} {
		if s != nil {
			errs = append(errs, setMark(s.conn, mark))
		}
	}
	if st.connected != nil {
		errs = append(errs, st.connected.setMark(mark))
	}
	return errors.Join(errs...)
}

// Shed implements Shedder. Setting a buffer may fail (without
// CAP_NET_ADMIN the kernel caps SO_RCVBUF at net.core.rmem_max, which only
// ever makes the shed buffer smaller); the age check holds regardless.
// The state outlasts Close: sockets a later Open makes start shed.
func (b *LinuxBind) Shed(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.shed = on
	if st := b.state.Load(); st != nil {
		b.shedSockets(st, on)
	}
}

// shedSockets applies Shed to st's shared sockets. b.mu must be held.
func (b *LinuxBind) shedSockets(st *linuxState, on bool) {
	// A negative SocketBuffer leaves the kernel's buffers alone, so there
	// is nothing to restore to: only the age check sheds then.
	size := b.opts.socketBuffer
	if on {
		size = min(size, ShedBuffer)
	}
	for _, s := range [...]*udpSocket{st.v4, st.v6} {
		if s != nil {
			s.shed.Store(on)
			if size >= 0 {
				_ = setRecvBuffer(s.conn, size)
			}
		}
	}
}

// BatchSize implements Bind.
func (b *LinuxBind) BatchSize() int { return b.opts.batchSize }

// Stats implements StatsBind.
func (b *LinuxBind) Stats() Stats { return b.stats.snapshot() }

// closeSockets closes the connected sockets, then IPv6 then IPv4, the
// reverse of opening.
func (st *linuxState) closeSockets() error {
	var errs []error
	if st.connected != nil {
		st.connected.closeAll()
	}
	for _, s := range [...]*udpSocket{st.v6, st.v4} {
		if s != nil {
			errs = append(errs, s.conn.Close())
		}
	}
	return errors.Join(errs...)
}
