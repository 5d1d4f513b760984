package conn

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// StdBind is the portable bind: one net.UDPConn per address family and one
// datagram per syscall. It has no offloads and no sticky source addresses
// (Endpoint.Src is ignored on send and left zero on receive). It is the
// default outside Linux and a reference implementation on Linux.
type StdBind struct {
	opts  Options
	stats counters

	// mu serializes Open, Close and SetMark, and guards mark.
	mu   sync.Mutex
	mark uint32
	// state is nil when closed; Send loads it without mu (see LinuxBind).
	state atomic.Pointer[stdState]
}

type stdState struct {
	v4, v6 *net.UDPConn
	port   uint16
}

var (
	_ Bind      = (*StdBind)(nil)
	_ StatsBind = (*StdBind)(nil)
)

// NewStd returns a closed portable bind.
func NewStd(opts Options) *StdBind { return &StdBind{opts: opts.withDefaults()} }

// Open implements Bind. It returns the IPv4 receive function first.
func (b *StdBind) Open(port uint16) ([]ReceiveFunc, uint16, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state.Load() != nil {
		return nil, 0, ErrBindOpen
	}
	c4, c6, actual, err := listenPair(port, b.opts.Logf)
	if err != nil {
		return nil, 0, err
	}
	st := &stdState{v4: c4, v6: c6, port: actual}
	var fns []ReceiveFunc
	for _, c := range [...]*net.UDPConn{c4, c6} {
		if c == nil {
			continue
		}
		if err := setSocketBuffers(c, b.opts.socketBuffer); err != nil {
			b.opts.Logf("conn: %v", err)
		}
		if err := allowFragments(c, c == c6); err != nil {
			b.opts.Logf("conn: %v", err)
		}
		if b.mark != 0 {
			if err := setMark(c, b.mark); err != nil {
				st.closeConns()
				return nil, 0, err
			}
		}
		fns = append(fns, b.receiveFunc(c))
	}
	b.state.Store(st)
	return fns, actual, nil
}

// receiveFunc reads one datagram per call from c.
func (b *StdBind) receiveFunc(c *net.UDPConn) ReceiveFunc {
	return func(bufs [][]byte, sizes []int, eps []Endpoint) (int, error) {
		if len(bufs) == 0 || len(sizes) == 0 || len(eps) == 0 {
			return 0, nil
		}
		n, _, flags, ap, err := c.ReadMsgUDPAddrPort(bufs[0], nil)
		if truncated(flags, err) {
			b.stats.rxOversize.Add(1)
			return 0, ErrOversize
		}
		if err != nil {
			return 0, err
		}
		sizes[0] = n
		eps[0] = Endpoint{Dst: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())}
		b.stats.rxMessages.Add(1)
		b.stats.rxPackets.Add(1)
		return 1, nil
	}
}

// Close implements Bind.
func (b *StdBind) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.state.Swap(nil)
	if st == nil {
		return nil
	}
	return st.closeConns()
}

// closeConns closes IPv6 then IPv4, the reverse of opening.
func (st *stdState) closeConns() error {
	var errs []error
	for _, c := range [...]*net.UDPConn{st.v6, st.v4} {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// SetMark implements Bind.
func (b *StdBind) SetMark(mark uint32) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.mark
	b.mark = mark
	st := b.state.Load()
	if st == nil || (mark == 0 && old == 0) {
		return nil
	}
	var errs []error
	for _, c := range [...]*net.UDPConn{st.v4, st.v6} {
		if c != nil {
			errs = append(errs, setMark(c, mark))
		}
	}
	return errors.Join(errs...)
}

// Send implements Bind, one syscall per datagram.
func (b *StdBind) Send(bufs [][]byte, ep Endpoint) error {
	st := b.state.Load()
	if st == nil {
		return ErrBindClosed
	}
	dst := netip.AddrPortFrom(ep.Dst.Addr().Unmap(), ep.Dst.Port())
	c := st.v4
	if dst.Addr().Is6() {
		c = st.v6
	}
	if !dst.Addr().IsValid() || dst.Port() == 0 {
		b.stats.sendErrors.Add(1)
		return fmt.Errorf("conn: send to invalid endpoint %v", ep.Dst)
	}
	if c == nil {
		b.stats.sendErrors.Add(1)
		return fmt.Errorf("conn: send to %v: no socket of that address family", dst)
	}
	for i, buf := range bufs {
		if _, _, err := c.WriteMsgUDPAddrPort(buf, nil, dst); err != nil {
			if errors.Is(err, net.ErrClosed) {
				return ErrBindClosed
			}
			b.stats.sendErrors.Add(1)
			return fmt.Errorf("conn: send datagram %d of %d to %v: %w", i+1, len(bufs), dst, err)
		}
		b.stats.txMessages.Add(1)
		b.stats.txPackets.Add(1)
	}
	return nil
}

// BatchSize implements Bind.
func (b *StdBind) BatchSize() int { return b.opts.batchSize }

// Stats implements StatsBind.
func (b *StdBind) Stats() Stats { return b.stats.snapshot() }
