package netstack

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// DefaultMaxPendingTCP is Forwarder.MaxPendingTCP's default.
const DefaultMaxPendingTCP = 256

// DefaultHandshakeTimeout is Forwarder.HandshakeTimeout's default: the
// SYN-ACK goes out at 0, 1, 3 and 7 s.
const DefaultHandshakeTimeout = 10 * time.Second

// Forwarder makes the stack terminate TCP and UDP addressed to any
// address, not only its own: the server side of a slirp-like relay. The
// stack's own listeners and sockets still take what is theirs first.
type Forwarder struct {
	// TCP is called on a goroutine of its own for each new connection
	// attempt (a SYN); it must call Accept or Refuse exactly once. Until
	// then the peer's SYN stays unanswered (its retransmissions are
	// ignored), so TCP may first find out whether the far side accepts.
	// nil: SYNs to other addresses are answered with a RST.
	TCP func(*TCPRequest)
	// MaxPendingTCP caps the requests TCP holds at once; further SYNs are
	// dropped (the peer retransmits). Default DefaultMaxPendingTCP.
	MaxPendingTCP int
	// HandshakeTimeout bounds the peer's side of an accepted handshake:
	// Accept fails when the peer has not completed it by then (gVisor
	// alone would resend its SYN-ACK for about two minutes, holding a
	// MaxPendingTCP slot). Default DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// UDP is called for the first datagram of each new flow (a source
	// and destination address and port with no socket yet), on the
	// packet's delivery path: it must not block. It returns whether it
	// took the flow (called Accept); a flow not taken is answered with
	// an ICMP port unreachable. nil: all are.
	UDP func(*UDPRequest) bool
	// Ping is called for each ICMP echo request to an address that is not
	// the stack's own, on the packet's delivery path: it must not block.
	// It returns whether it took the request; answer with SendEchoReply.
	// nil (or false): the request goes unanswered.
	Ping func(PingRequest) bool
}

// ErrNotPromiscuous is SetForwarder's error on a Net made without
// Options.Promiscuous.
var ErrNotPromiscuous = errors.New("netstack: a forwarder needs Options.Promiscuous")

// SetForwarder installs f, replacing any earlier one. The Net must have
// been made with Options.Promiscuous. Call it before traffic flows.
func (n *Net) SetForwarder(f Forwarder) error {
	if n.isClosed() {
		return errClosed
	}
	if !n.opts.Promiscuous {
		return ErrNotPromiscuous
	}
	if f.TCP != nil {
		pending := f.MaxPendingTCP
		if pending <= 0 {
			pending = DefaultMaxPendingTCP
		}
		// The starting receive buffer is the stack's default; auto-tuning
		// grows it to tcpReceiveBufferMax, which also sets the window
		// scale, so a relayed flow can have as much in flight as a local
		// one.
		hs := f.HandshakeTimeout
		if hs <= 0 {
			hs = DefaultHandshakeTimeout
		}
		fw := tcp.NewForwarder(n.stack, min(defaultRcvBuffer, n.opts.tcpReceiveBufferMax), pending, func(r *tcp.ForwarderRequest) {
			id := r.ID()
			f.TCP(&TCPRequest{Src: remoteOf(id), Dst: localOf(id), r: r, handshake: hs})
		})
		n.stack.SetTransportProtocolHandler(tcp.ProtocolNumber, fw.HandlePacket)
	}
	if f.UDP != nil {
		fw := udp.NewForwarder(n.stack, func(r *udp.ForwarderRequest) bool {
			id := r.ID()
			return f.UDP(&UDPRequest{Src: remoteOf(id), Dst: localOf(id), r: r})
		})
		n.stack.SetTransportProtocolHandler(udp.ProtocolNumber, fw.HandlePacket)
	}
	if f.Ping != nil {
		n.stack.SetTransportProtocolHandler(icmp.ProtocolNumber4, n.handlePing(f.Ping, false))
		n.stack.SetTransportProtocolHandler(icmp.ProtocolNumber6, n.handlePing(f.Ping, true))
	}
	return nil
}

// remoteOf and localOf read an endpoint ID: "remote" is the peer that
// sent the packet, "local" the address it was sent to.
func remoteOf(id stack.TransportEndpointID) netip.AddrPort {
	a, _ := netip.AddrFromSlice(id.RemoteAddress.AsSlice())
	return netip.AddrPortFrom(a.Unmap(), id.RemotePort)
}

func localOf(id stack.TransportEndpointID) netip.AddrPort {
	a, _ := netip.AddrFromSlice(id.LocalAddress.AsSlice())
	return netip.AddrPortFrom(a.Unmap(), id.LocalPort)
}

// TCPRequest is a peer's SYN to Dst from Src, waiting for Accept or
// Refuse.
type TCPRequest struct {
	Src, Dst  netip.AddrPort
	once      sync.Once
	r         *tcp.ForwarderRequest
	handshake time.Duration
}

var errDone = errors.New("netstack: request already answered")

// Accept completes the handshake and returns the connection. On error the
// peer has been sent a RST, or the handshake did not complete within the
// Forwarder's HandshakeTimeout.
func (q *TCPRequest) Accept() (*ForwardedTCPConn, error) {
	var c *ForwardedTCPConn
	err := errDone
	q.once.Do(func() {
		var wq waiter.Queue
		// CreateEndpoint waits on wq for the handshake's end, for as long
		// as gVisor resends its SYN-ACK; waking it early makes it give up
		// on a handshake that is not complete (and keep one that is).
		t := time.AfterFunc(q.handshake, func() { wq.Notify(waiter.WritableEvents) })
		ep, terr := q.r.CreateEndpoint(&wq)
		t.Stop()
		if terr != nil {
			q.r.Complete(true)
			err = tcpipErr("accept "+q.Dst.String(), terr)
			return
		}
		q.r.Complete(false)
		c, err = &ForwardedTCPConn{TCPConn: gonet.NewTCPConn(&wq, ep), ep: ep}, nil
	})
	return c, err
}

// Refuse answers the SYN with a RST. After Accept it does nothing.
func (q *TCPRequest) Refuse() {
	q.once.Do(func() { q.r.Complete(true) })
}

// Drop answers nothing: the peer's SYN is forgotten (the peer resends
// it) and its MaxPendingTCP slot freed. After Accept it does nothing.
func (q *TCPRequest) Drop() {
	q.once.Do(func() { q.r.Complete(false) })
}

// ForwardedTCPConn is an accepted TCPRequest's connection.
type ForwardedTCPConn struct {
	*gonet.TCPConn
	ep    tcpip.Endpoint
	close sync.Once // the first of Close and Abort wins; the rest do nothing
}

// Abort resets the connection (the peer gets a RST) and closes it,
// unless it was closed already.
func (c *ForwardedTCPConn) Abort() {
	c.close.Do(func() {
		c.ep.Abort()
		c.TCPConn.Close()
	})
}

// Close closes the connection (FIN), unless it was aborted or closed
// already.
func (c *ForwardedTCPConn) Close() error {
	c.close.Do(func() { c.TCPConn.Close() })
	return nil
}

// UDPRequest is the first datagram of a flow from Src to Dst.
type UDPRequest struct {
	Src, Dst netip.AddrPort
	r        *udp.ForwarderRequest
}

// Accept opens the flow's socket: bound to Dst, connected to Src, so its
// writes reach the peer from the address it wrote to. The datagram that
// made the request is its first to read.
func (q *UDPRequest) Accept() (net.Conn, error) {
	var wq waiter.Queue
	ep, err := q.r.CreateEndpoint(&wq)
	if err != nil {
		return nil, tcpipErr("accept udp "+q.Dst.String(), err)
	}
	return gonet.NewUDPConn(&wq, ep), nil
}

// SetBufferSizes sets the connection's send and receive buffer sizes in
// bytes (0 leaves one as it is). A size set stops the stack's
// auto-tuning of that buffer; a smaller receive buffer shrinks the
// window the peer is offered, a smaller send buffer what the stack holds
// unacknowledged. Window scaling stays as the handshake set it.
func (c *ForwardedTCPConn) SetBufferSizes(send, receive int) {
	o := c.ep.SocketOptions()
	if send > 0 {
		o.SetSendBufferSize(int64(send), true)
	}
	if receive > 0 {
		o.SetReceiveBufferSize(int64(receive), true)
	}
}
