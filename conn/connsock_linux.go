package conn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// connTable is one Open's connected sockets, by remote address. Send reads
// the map without a lock (copy on write: connects are rare, sends are the
// hot path); mu serializes the writers.
type connTable struct {
	b      *LinuxBind
	st     *linuxState
	reader *connReader // reads every socket of the table

	mu     sync.Mutex // guards closed and replacing m
	closed bool
	m      atomic.Pointer[map[netip.AddrPort]*connSocket]
}

// newConnTable sets SO_REUSEPORT on the shared sockets so connected ones
// can share their port. It returns nil, which turns Connect off, when the
// options say so or the kernel refuses.
func (b *LinuxBind) newConnTable(st *linuxState) *connTable {
	if b.opts.MaxConnected < 0 {
		return nil
	}
	for _, s := range [...]*udpSocket{st.v4, st.v6} {
		if s == nil {
			continue
		}
		if err := setReusePort(s.conn); err != nil {
			b.opts.Logf("conn: connected per-peer sockets off: %v", err)
			return nil
		}
	}
	r, err := newConnReader(b.opts, &b.stats)
	if err != nil {
		b.opts.Logf("conn: connected per-peer sockets off: %v", err)
		return nil
	}
	return &connTable{b: b, st: st, reader: r}
}

// connSocket is one connected socket (PeerConn).
type connSocket struct {
	t    *connTable
	sock *udpSocket
	ep   Endpoint // Src is the address the socket is bound to
	// broken is set when a send failed in a way that will not heal (the
	// local address is gone): Bind.Send then skips the socket, and the
	// owner replaces it when the peer's endpoint next changes.
	broken atomic.Bool
	once   sync.Once
	// probeMu serializes SendProbe, which changes a socket option for
	// one send.
	probeMu sync.Mutex

	// Its place in the table's connReader, guarded by connReader.mu: the
	// slot and generation its epoll events carry, whether it waits in
	// the ring of ready sockets and its neighbours there, and gone once
	// it is closing (it never enters the ring again).
	slot, gen    uint32
	inRing, gone bool
	prev, next   *connSocket
	// errs counts the reads in a row that returned a socket errno; only
	// the reader touches it.
	errs uint8
}

var _ PeerConn = (*connSocket)(nil)

// Connect implements ConnectBind.
func (b *LinuxBind) Connect(ep Endpoint) (PeerConn, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.state.Load()
	if st == nil {
		return nil, ErrBindClosed
	}
	if st.connected == nil {
		return nil, ErrConnectOff
	}
	cs, err := st.connected.connect(ep, b.mark)
	if err != nil {
		if !errors.Is(err, ErrConnected) {
			b.stats.connFailures.Add(1)
		}
		return nil, err
	}
	b.stats.connOpened.Add(1)
	return cs, nil
}

// ConnectedReceiveFuncs implements ConnectBind: the one reader of every
// connected socket (see connReader).
func (b *LinuxBind) ConnectedReceiveFuncs() []ReceiveFunc {
	st := b.state.Load()
	if st == nil || st.connected == nil {
		return nil
	}
	return []ReceiveFunc{st.connected.reader.receive}
}

// connect opens, sets up and connects a socket for ep, and publishes it.
// The caller holds b.mu, which also guards mark.
func (t *connTable) connect(ep Endpoint, mark uint32) (*connSocket, error) {
	dst := netip.AddrPortFrom(ep.Dst.Addr().Unmap(), ep.Dst.Port())
	if !dst.Addr().IsValid() || dst.Port() == 0 {
		return nil, fmt.Errorf("conn: connect to invalid endpoint %v", ep.Dst)
	}
	v6 := dst.Addr().Is6()
	if (v6 && t.st.v6 == nil) || (!v6 && t.st.v4 == nil) {
		return nil, fmt.Errorf("%w: no socket of %v's address family", ErrConnectOff, dst)
	}
	t.mu.Lock()
	closed, m := t.closed, t.load()
	t.mu.Unlock()
	switch {
	case closed:
		return nil, ErrBindClosed
	case m[dst] != nil:
		return nil, ErrConnected
	case len(m) >= t.b.opts.MaxConnected:
		return nil, ErrConnectLimit
	}
	src := ep.Src.Unmap()
	if !src.IsValid() || src.Is6() != v6 {
		src = netip.Addr{}
	}
	c, err := listenShared(v6, src, ep.SrcIfIndex, t.st.port)
	if err != nil {
		return nil, err
	}
	cs, err := t.setUp(c, v6, dst, ep.SrcIfIndex, mark)
	if err != nil {
		c.Close()
		return nil, err
	}
	if err := t.reader.register(cs); err != nil {
		c.Close()
		return nil, err
	}
	if err := t.publish(cs); err != nil {
		t.reader.unregister(cs)
		c.Close()
		return nil, err
	}
	return cs, nil
}

// setUp gives c the shared sockets' options (buffers, fwmark, PKTINFO,
// timestamps, GRO, GSO), then connects it: the mark must be on before the
// route lookup connect does.
func (t *connTable) setUp(c *net.UDPConn, v6 bool, dst netip.AddrPort, ifIndex int32, mark uint32) (*connSocket, error) {
	s, err := newUDPSocket(c, v6, t.b.opts, mark, &t.b.stats)
	if err != nil {
		return nil, err
	}
	var local netip.Addr
	err = sockoptControl(c, func(fd int) error {
		if err := unix.Connect(fd, sockaddrOf(dst, scopeOf(dst.Addr(), ifIndex))); err != nil {
			return fmt.Errorf("conn: connect to %v: %w", dst, err)
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			return fmt.Errorf("conn: getsockname: %w", err)
		}
		local = addrOf(sa)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &connSocket{t: t, sock: s, ep: Endpoint{Dst: dst, Src: local, SrcIfIndex: ifIndex}}, nil
}

// publish adds cs to the map Send reads.
func (t *connTable) publish(cs *connSocket) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrBindClosed
	}
	old := t.load()
	m := make(map[netip.AddrPort]*connSocket, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[cs.ep.Dst] = cs
	t.m.Store(&m)
	return nil
}

// load is the current map (nil when empty).
func (t *connTable) load() map[netip.AddrPort]*connSocket {
	if p := t.m.Load(); p != nil {
		return *p
	}
	return nil
}

// lookup is the connected socket for dst, nil when there is none.
func (t *connTable) lookup(dst netip.AddrPort) *connSocket {
	m := t.load()
	if len(m) == 0 {
		return nil
	}
	return m[dst]
}

// remove takes cs out of the map if it is still there.
func (t *connTable) remove(cs *connSocket) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.load()
	if old[cs.ep.Dst] != cs {
		return
	}
	m := make(map[netip.AddrPort]*connSocket, len(old))
	for k, v := range old {
		if v != cs {
			m[k] = v
		}
	}
	t.m.Store(&m)
}

// closeAll closes every connected socket, then their reader's epoll
// instance, which ends the reader's calls; Connect fails from now on.
func (t *connTable) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for _, cs := range t.load() {
		cs.shutdown()
	}
	t.m.Store(nil)
	t.reader.close()
}

// setMark sets the fwmark on every connected socket and connects it again:
// an IPv4 connected socket keeps the route it looked up with the old mark
// until something invalidates it, and policy routing by mark (wg-quick's
// "not fwmark" rule) may send the old route into the tunnel itself.
func (t *connTable) setMark(mark uint32) error {
	var errs []error
	for _, cs := range t.load() {
		errs = append(errs, setMark(cs.sock.conn, mark))
		errs = append(errs, sockoptControl(cs.sock.conn, func(fd int) error {
			return unix.Connect(fd, sockaddrOf(cs.ep.Dst, scopeOf(cs.ep.Dst.Addr(), cs.ep.SrcIfIndex)))
		}))
	}
	return errors.Join(errs...)
}

// Endpoint implements PeerConn.
func (cs *connSocket) Endpoint() Endpoint { return cs.ep }

// socketErrno reports an errno from the socket, as opposed to its closing.
// Apart so that the steady state, which has no error, allocates nothing.
func socketErrno(err error) bool {
	var errno syscall.Errno
	return !errors.Is(err, net.ErrClosed) && errors.As(err, &errno)
}

// Send implements PeerConn.
func (cs *connSocket) Send(bufs [][]byte) error {
	return cs.t.b.sendConnected(cs, bufs)
}

// Close implements PeerConn.
func (cs *connSocket) Close() error {
	cs.t.remove(cs)
	cs.shutdown()
	return nil
}

// shutdown closes the socket once, out of its reader first.
func (cs *connSocket) shutdown() {
	cs.once.Do(func() {
		cs.t.reader.unregister(cs)
		cs.sock.conn.Close()
		cs.t.b.stats.connClosed.Add(1)
	})
}

// carries reports whether a Send to ep may use cs: the socket's source is
// fixed at connect, so an endpoint whose sticky source differs (the peer
// now writes to another of our addresses) goes through the shared socket
// until the owner reconnects.
func (cs *connSocket) carries(ep Endpoint) bool {
	if cs.broken.Load() {
		return false
	}
	src := ep.Src.Unmap()
	return !src.IsValid() || src == cs.ep.Src
}

// sendConnected sends bufs on cs with no address and no PKTINFO (the
// kernel then reuses the route cached at connect), only UDP_SEGMENT.
func (b *LinuxBind) sendConnected(cs *connSocket, bufs [][]byte) error {
	if len(bufs) == 0 {
		return nil
	}
	sc := b.sendPool.get()
	defer b.sendPool.put(sc)
	sc.nameLen = 0
	src := cs.checkedSource()
	for len(bufs) > 0 {
		chunk := bufs[:min(len(bufs), len(sc.msgs))]
		bufs = bufs[len(chunk):]
		if err := b.sendChunk(cs.sock, sc, chunk, &src); err != nil {
			var errno unix.Errno
			if errors.As(err, &errno) && stickyErrno(errno) {
				cs.broken.Store(true)
			}
			return err
		}
	}
	return nil
}

// checkedSource is the source a send on cs names explicitly so that the
// kernel checks it is still ours. An IPv4 socket needs none: deleting a
// local address invalidates the route the socket cached, and the new
// lookup refuses the gone source. IPv6 keeps sending from a deleted
// address, so its sends carry IPV6_PKTINFO, which the kernel validates
// (at the price of the route lookup a connected send would skip).
func (cs *connSocket) checkedSource() sendSource {
	src := cs.ep.Src
	if !src.Is6() || !cs.sock.pktinfo {
		return sendSource{}
	}
	s := sendSource{addr: src, fixed: true}
	if src.IsLinkLocalUnicast() {
		s.ifIndex = cs.ep.SrcIfIndex
	}
	return s
}

// listenShared opens a UDP socket on port with SO_REUSEPORT set before the
// bind, on src or the wildcard address.
func listenShared(v6 bool, src netip.Addr, ifIndex int32, port uint16) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		})
		return errors.Join(err, serr)
	}}
	network, addr := "udp4", &net.UDPAddr{Port: int(port)}
	if v6 {
		network, addr.IP = "udp6", net.IPv6unspecified
	}
	if src.IsValid() {
		addr.IP = src.AsSlice()
		if src.Is6() && src.IsLinkLocalUnicast() && ifIndex > 0 {
			addr.Zone = strconv.Itoa(int(ifIndex))
		}
	}
	pc, err := lc.ListenPacket(context.Background(), network, addr.String())
	if err != nil {
		return nil, fmt.Errorf("conn: connected socket on %v: %w", addr, err)
	}
	c, ok := pc.(*net.UDPConn)
	if !ok {
		pc.Close()
		return nil, fmt.Errorf("conn: connected socket on %v: not a UDP socket", addr)
	}
	return c, nil
}

// sockaddrOf is ap as a unix.Sockaddr for connect.
func sockaddrOf(ap netip.AddrPort, scope uint32) unix.Sockaddr {
	if ap.Addr().Is4() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), ZoneId: scope, Addr: ap.Addr().As16()}
}

// addrOf is the address of a unix.Sockaddr (invalid for other families).
func addrOf(sa unix.Sockaddr) netip.Addr {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrFrom4(sa.Addr)
	case *unix.SockaddrInet6:
		return netip.AddrFrom16(sa.Addr).Unmap()
	}
	return netip.Addr{}
}
