package tunnel

import (
	"errors"
	"net"
	"net/netip"
	"os"

	"github.com/fips-go/fips-go/device"
)

// ErrNoRoute: no peer's allowed IPs hold the destination, so the device
// would drop every packet to it (its tx_drop_no_route counter). Dials,
// pings and datagrams to such an address fail at once with a *net.OpError
// naming it, instead of waiting out their deadline.
var ErrNoRoute = errors.New("tunnel: no peer routes this address (not in any peer's AllowedIPs)")

// closedError is what an operation on a stopped tunnel returns. It
// matches net.ErrClosed, as a closed socket's errors do, and also the
// device's reason when it stopped by itself.
type closedError struct{ cause error }

func (e *closedError) Error() string {
	if e.cause != nil && !errors.Is(e.cause, device.ErrClosed) {
		return "tunnel stopped: " + e.cause.Error()
	}
	return "tunnel closed"
}

func (e *closedError) Unwrap() []error {
	if e.cause == nil {
		return []error{net.ErrClosed}
	}
	return []error{net.ErrClosed, e.cause}
}

// stopped is a closedError once the tunnel's device has stopped, else nil.
func (t *Tunnel) stopped() error {
	select {
	case <-t.dev.Done():
		return &closedError{cause: t.dev.Err()}
	default:
		return nil
	}
}

// opError is err as op's result: a closedError when the tunnel has
// stopped (or its stack is closing, which the stack reports as
// os.ErrClosed before the device is done), else err itself.
func (t *Tunnel) opError(op, network string, addr net.Addr, err error) error {
	if err == nil {
		return nil
	}
	cerr := t.stopped()
	if cerr == nil && errors.Is(err, os.ErrClosed) {
		cerr = &closedError{}
	}
	if cerr == nil {
		return err
	}
	return &net.OpError{Op: op, Net: network, Addr: addr, Err: cerr}
}

// routes reports whether a packet to a goes somewhere: to one of the
// tunnel's own addresses (the stack delivers those itself) or to the
// peer whose allowed IPs hold it.
func (t *Tunnel) routes(a netip.Addr) bool {
	a = a.Unmap()
	if t.isOwn(a) {
		return true
	}
	_, ok := t.dev.PeerFor(a)
	return ok
}

// hostAddr is a net.Addr for an address not (yet) resolved, so that an
// error can still name what the caller asked for.
type hostAddr struct{ network, address string }

func (h hostAddr) Network() string { return h.network }
func (h hostAddr) String() string  { return h.address }

// netAddr is ap as the net.Addr of network's kind.
func netAddr(network string, ap netip.AddrPort) net.Addr {
	if len(network) > 0 && network[0] == 't' {
		return net.TCPAddrFromAddrPort(ap)
	}
	return net.UDPAddrFromAddrPort(ap)
}
