package tunnel

import (
	"bytes"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"
)

// listener is what Listen returns: one stack listener, or one per IP
// family accepting into a single queue, with the address it reports and
// errors that say when the tunnel closed.
type listener struct {
	t       *Tunnel
	network string
	lns     []bound[net.Listener]
	addr    net.Addr

	// With two listeners, a goroutine each accepts into conns (unbuffered:
	// at most one connection waits per family); each sends its one
	// final error to errs, which has room for both.
	conns     chan net.Conn
	errs      chan error
	done      chan struct{} // closed by Close
	closeOnce sync.Once
	wg        sync.WaitGroup
}

func newListener(t *Tunnel, network string, lns []bound[net.Listener]) *listener {
	l := &listener{
		t: t, network: network, lns: lns,
		addr: net.TCPAddrFromAddrPort(t.shown(lns[0].ap)),
		done: make(chan struct{}),
	}
	if len(lns) > 1 {
		l.conns = make(chan net.Conn)
		l.errs = make(chan error, len(lns))
		for _, b := range lns {
			l.wg.Add(1)
			go l.pump(b.s)
		}
	}
	return l
}

func (l *listener) pump(ln net.Listener) {
	defer l.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			l.errs <- err
			return
		}
		select {
		case l.conns <- c:
		case <-l.done:
			c.Close()
			return
		}
	}
}

// Accept waits for the next connection of either family. When one
// family's listener fails, the whole listener closes: a server must not
// go on half deaf without knowing it.
func (l *listener) Accept() (net.Conn, error) {
	if len(l.lns) == 1 {
		c, err := l.lns[0].s.Accept()
		if err != nil {
			return nil, l.err(err)
		}
		return c, nil
	}
	select {
	case c := <-l.conns:
		return c, nil
	case err := <-l.errs:
		err = l.err(err)
		l.Close()
		return nil, err
	case <-l.done:
		return nil, l.err(net.ErrClosed)
	}
}

// err is err from an accept: net.ErrClosed once Close was called, the
// tunnel's closed error once it stopped.
func (l *listener) err(err error) error {
	select {
	case <-l.done:
		return &net.OpError{Op: "accept", Net: l.network, Addr: l.addr, Err: net.ErrClosed}
	default:
	}
	return l.t.opError("accept", l.network, l.addr, err)
}

// Close closes every family's listener and waits for their goroutines.
func (l *listener) Close() error {
	var first error
	l.closeOnce.Do(func() {
		close(l.done)
		for _, b := range l.lns {
			if err := b.s.Close(); err != nil && first == nil {
				first = err
			}
		}
		l.wg.Wait()
	})
	return first
}

// Addr is the first family's address, an unspecified one replaced by the
// tunnel's own address of that family.
func (l *listener) Addr() net.Addr { return l.addr }

// packetConn is what ListenPacket returns: one stack socket, or one per
// IP family read into a single queue. WriteTo checks the route first and
// picks the socket of the destination's family.
type packetConn struct {
	t       *Tunnel
	network string
	pcs     []bound[net.PacketConn]
	addr    net.Addr

	// With two sockets, a goroutine each reads into in (unbuffered: at
	// most one datagram waits per family, copied out of a 64 KiB buffer
	// of its own); each sends its one final error to errs.
	in        chan datagram
	errs      chan error
	done      chan struct{} // closed by Close
	closeOnce sync.Once
	wg        sync.WaitGroup

	mu       sync.Mutex    // guards the two fields below
	deadline time.Time     // the read deadline, with two sockets
	moved    chan struct{} // closed when deadline changes
}

type datagram struct {
	b    []byte
	from net.Addr
}

func newPacketConn(t *Tunnel, network string, pcs []bound[net.PacketConn]) *packetConn {
	p := &packetConn{
		t: t, network: network, pcs: pcs,
		addr: net.UDPAddrFromAddrPort(t.shown(pcs[0].ap)),
		done: make(chan struct{}), moved: make(chan struct{}),
	}
	if len(pcs) > 1 {
		p.in = make(chan datagram)
		p.errs = make(chan error, len(pcs))
		for _, b := range pcs {
			p.wg.Add(1)
			go p.pump(b.s)
		}
	}
	return p
}

func (p *packetConn) pump(pc net.PacketConn) {
	defer p.wg.Done()
	buf := make([]byte, 1<<16)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			p.errs <- err
			return
		}
		select {
		case p.in <- datagram{bytes.Clone(buf[:n]), from}:
		case <-p.done:
			return
		}
	}
}

// ReadFrom reads the next datagram of either family; as on a UDP socket, a
// datagram longer than b is cut to fit.
func (p *packetConn) ReadFrom(b []byte) (int, net.Addr, error) {
	if len(p.pcs) == 1 {
		n, from, err := p.pcs[0].s.ReadFrom(b)
		return n, from, p.err("read", err)
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-p.done:
			return 0, nil, p.err("read", net.ErrClosed)
		default:
		}
		p.mu.Lock()
		deadline, moved := p.deadline, p.moved
		p.mu.Unlock()
		var expired <-chan time.Time
		if !deadline.IsZero() {
			d := time.Until(deadline)
			if d <= 0 {
				return 0, nil, &net.OpError{Op: "read", Net: p.network, Addr: p.addr, Err: os.ErrDeadlineExceeded}
			}
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			expired = timer.C
		}
		select {
		case d := <-p.in:
			return copy(b, d.b), d.from, nil
		case err := <-p.errs:
			err = p.err("read", err)
			p.Close()
			return 0, nil, err
		case <-p.done:
			return 0, nil, p.err("read", net.ErrClosed)
		case <-expired:
		case <-moved:
		}
	}
}

// WriteTo sends b to addr from the socket of addr's family, or fails at
// once with ErrNoRoute when no peer routes addr.
func (p *packetConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	pc := p.pcs[0].s
	var ap netip.AddrPort
	if u, ok := addr.(*net.UDPAddr); ok {
		ap = u.AddrPort()
	} else if addr != nil {
		ap, _ = netip.ParseAddrPort(addr.String())
	}
	if ap.IsValid() {
		ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		if !p.t.routes(ap.Addr()) {
			return 0, &net.OpError{Op: "write", Net: p.network, Source: p.addr, Addr: addr, Err: ErrNoRoute}
		}
		for _, s := range p.pcs {
			if s.ap.Addr().Is4() == ap.Addr().Is4() {
				pc = s.s
			}
		}
		addr = net.UDPAddrFromAddrPort(ap)
	}
	n, err := pc.WriteTo(b, addr)
	return n, p.err("write", err)
}

// err is err from op: net.ErrClosed once Close was called, the tunnel's
// closed error once it stopped.
func (p *packetConn) err(op string, err error) error {
	if err == nil {
		return nil
	}
	select {
	case <-p.done:
		return &net.OpError{Op: op, Net: p.network, Addr: p.addr, Err: net.ErrClosed}
	default:
	}
	return p.t.opError(op, p.network, p.addr, err)
}

// Close closes every family's socket and waits for their goroutines.
func (p *packetConn) Close() error {
	var first error
	p.closeOnce.Do(func() {
		close(p.done)
		for _, b := range p.pcs {
			if err := b.s.Close(); err != nil && first == nil {
				first = err
			}
		}
		p.wg.Wait()
	})
	return first
}

// LocalAddr is the first family's address, an unspecified one replaced by
// the tunnel's own address of that family.
func (p *packetConn) LocalAddr() net.Addr { return p.addr }

func (p *packetConn) SetDeadline(t time.Time) error {
	p.SetReadDeadline(t)
	return p.SetWriteDeadline(t)
}

// SetReadDeadline applies to the sockets themselves with one family; with
// two, to the wait on their queue.
func (p *packetConn) SetReadDeadline(t time.Time) error {
	if len(p.pcs) == 1 {
		return p.pcs[0].s.SetReadDeadline(t)
	}
	p.mu.Lock()
	p.deadline = t
	close(p.moved)
	p.moved = make(chan struct{})
	p.mu.Unlock()
	return nil
}

func (p *packetConn) SetWriteDeadline(t time.Time) error {
	var first error
	for _, b := range p.pcs {
		if err := b.s.SetWriteDeadline(t); err != nil && first == nil {
			first = err
		}
	}
	return first
}
