package socks5

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/fips-go/fips-go/internal/app/proxy"
	"github.com/fips-go/fips-go/internal/app/sockowner"
)

// maxDatagram is the largest UDP payload relayed, and the size of each
// association's two buffers.
const maxDatagram = 65535

// association is one UDP ASSOCIATE: a UDP socket beside the listener for
// the client, and one socket per IP family on the tunnel's side.
type association struct {
	s      *Server
	ctx    context.Context
	local  *net.UDPConn // the client's side
	act    proxy.Activity
	relay  netip.AddrPort // local's address, as the client sends to it
	want   netip.AddrPort // the client's source as the request named it (parts may be zero)
	client netip.AddrPort // learned from the first datagram; then fixed
	// owner is the uid of the client's end of the control connection,
	// when it is a socket of this machine whose owner the system tells
	// (ownerKnown); then only that user's sockets may send the first
	// datagram. Otherwise only the address checks apply.
	owner      uint32
	ownerKnown bool
	// refused marks the source ports the owner check turned away, so a
	// sender it refused costs one lookup (a netlink query, maybe a read
	// of /proc/net/udp), not one per datagram; made on the first
	// refusal, 8 KiB. Only relayFromClient's goroutine uses it.
	refused *[1 << 16 / 64]uint64

	mu     sync.Mutex        // guards tunnel and closed
	tunnel [2]net.PacketConn // [0] IPv4, [1] IPv6; opened on first use
	closed bool
	wg     sync.WaitGroup
}

// associate runs a UDP ASSOCIATE until the control connection ends or the
// association is idle. The relay binds to the address the client reached
// the listener on (loopback unless the user chose otherwise) and accepts
// datagrams only from the control connection's IP, and from the port the
// client named or the first one it used. When the client is on this
// machine and the system tells socket owners (Linux), that first datagram
// must also come from a socket of the user who owns the control
// connection, so another local user cannot take the association over by
// sending first. Elsewhere (and for a client on another machine) only the
// address checks remain: a client that names its port is held to that
// exact address, one that sends 0.0.0.0:0 relies on sending first.
func (s *Server) associate(ctx context.Context, c net.Conn, req Addr) {
	lap, _ := netip.ParseAddrPort(c.LocalAddr().String())
	rap, _ := netip.ParseAddrPort(c.RemoteAddr().String())
	pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lap.Addr(), 0)))
	if err != nil {
		s.opts.Logf("socks5: udp associate: %v", err)
		c.Write(AppendReply(nil, RepGeneralFailure, Addr{}))
		return
	}
	a := &association{s: s, ctx: ctx, local: pc}
	a.want = netip.AddrPortFrom(rap.Addr().Unmap(), 0)
	a.owner, a.ownerKnown = s.controlOwner(lap, rap)
	if req.IP.IsValid() && !req.IP.IsUnspecified() && req.IP.Unmap() != a.want.Addr() {
		s.opts.Logf("socks5: udp associate from %v for %v: refused, not the client's address", rap, req)
		c.Write(AppendReply(nil, RepNotAllowed, Addr{}))
		pc.Close()
		return
	}
	a.want = netip.AddrPortFrom(a.want.Addr(), req.Port)
	bound, _ := netip.ParseAddrPort(pc.LocalAddr().String())
	a.relay = netip.AddrPortFrom(lap.Addr().Unmap(), bound.Port())
	if _, err := c.Write(AppendReply(nil, RepSucceeded, AddrFrom(bound))); err != nil {
		pc.Close()
		return
	}
	c.SetDeadline(time.Time{})
	a.act.Touch()
	stop := make(chan struct{})
	closeAll := func() { c.Close(); a.close() }
	go proxy.CloseWhenIdle(ctx, &a.act, s.opts.IdleTimeout, stop, closeAll)
	a.wg.Go(func() {
		// The association lives as long as the control connection.
		var b [1]byte
		for {
			if _, err := c.Read(b[:]); err != nil {
				closeAll()
				return
			}
		}
	})
	a.relayFromClient()
	closeAll()
	close(stop)
	a.wg.Wait()
}

func (a *association) close() {
	a.local.Close()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true // a later tunnelSocket call must not open a new one
	for i, t := range a.tunnel {
		if t != nil {
			t.Close()
			a.tunnel[i] = nil
		}
	}
}

// relayFromClient relays the client's datagrams into the tunnel.
func (a *association) relayFromClient() {
	buf := make([]byte, maxDatagram)
	for {
		n, from, err := a.local.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		switch a.fromClient(from) {
		case foreign:
			a.s.udpForeign.Add(1)
			continue
		case wrongOwner:
			a.s.udpWrongOwner.Add(1)
			continue
		}
		to, payload, err := ParseUDP(buf[:n])
		if err != nil {
			a.s.udpMalformed.Add(1)
			continue
		}
		dst, err := a.s.resolve(a.ctx, to)
		if err != nil || !dst.Addr().IsValid() || dst.Port() == 0 {
			a.s.udpUnresolvable.Add(1)
			continue
		}
		t := a.tunnelSocket(dst.Addr().Is6())
		if t == nil {
			continue
		}
		a.act.Touch()
		t.WriteTo(payload, net.UDPAddrFromAddrPort(dst))
	}
}

// verdict is what becomes of a datagram on the client's side.
type verdict uint8

const (
	accept     verdict = iota
	foreign            // not the client's address
	wrongOwner         // the client's address, another user's socket
)

// ownerFunc tells the uid of the socket of this machine whose own address
// is self and whose peer is peer (sockowner.Owner).
type ownerFunc func(p sockowner.Proto, self, peer netip.AddrPort) (uint32, error)

// controlOwner finds the user of the client's end of the control
// connection, which reached the listener at lap from rap.
func (s *Server) controlOwner(lap, rap netip.AddrPort) (uint32, bool) {
	if s.owner == nil {
		return 0, false
	}
	uid, err := s.owner(sockowner.TCP, rap, lap)
	if err != nil {
		if rap.Addr().IsLoopback() && !errors.Is(err, sockowner.ErrUnsupported) {
			s.opts.Logf("socks5: udp associate from %v: its owner is unknown (%v); accepting the client's datagrams by address only", rap, err)
		}
		return 0, false
	}
	return uid, true
}

// fromClient checks a datagram's source and learns the client's port from
// the first one that passes. Until then, a datagram must come from the
// control connection's address, from the port the client named if it
// named one, and from a socket of the control connection's owner if that
// is known; a socket whose owner cannot be found is refused too.
func (a *association) fromClient(from netip.AddrPort) verdict {
	if from.Addr() != a.want.Addr() {
		return foreign
	}
	if a.client.IsValid() {
		if from != a.client {
			return foreign
		}
		return accept
	}
	if a.want.Port() != 0 && from.Port() != a.want.Port() {
		return foreign
	}
	if a.ownerKnown && !a.ownedByClient(from) {
		return wrongOwner
	}
	a.client = from
	return accept
}

// ownedByClient reports whether from is a socket of the control
// connection's owner, asking the system once per source port. A port
// refused for a definite answer (another user's socket, or none) stays
// refused for the association; one refused because the lookup failed is
// asked again.
func (a *association) ownedByClient(from netip.AddrPort) bool {
	p := from.Port()
	if a.refused != nil && a.refused[p/64]&(1<<(p%64)) != 0 {
		return false
	}
	uid, err := a.s.owner(sockowner.UDP, from, a.relay)
	if err == nil && uid == a.owner {
		return true
	}
	if err == nil || errors.Is(err, sockowner.ErrNotFound) {
		if a.refused == nil {
			a.refused = new([1 << 16 / 64]uint64)
		}
		a.refused[p/64] |= 1 << (p % 64)
	}
	return false
}

// tunnelSocket returns the family's tunnel socket, opening it and its
// reader on first use; nil when that fails or the association closed.
func (a *association) tunnelSocket(v6 bool) net.PacketConn {
	i := 0
	if v6 {
		i = 1
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	if t := a.tunnel[i]; t != nil {
		return t
	}
	t, err := a.s.opts.ListenUDP(v6)
	if err != nil {
		a.s.opts.Logf("socks5: udp: tunnel socket: %v", err)
		return nil
	}
	a.tunnel[i] = t
	a.wg.Go(func() { a.toClient(t) })
	return t
}

// toClient relays datagrams from the tunnel to the client, each with the
// header naming its source.
func (a *association) toClient(t net.PacketConn) {
	buf := make([]byte, maxDatagram+262)
	for {
		n, from, err := t.ReadFrom(buf[262:])
		if err != nil {
			return
		}
		src, err := netip.ParseAddrPort(from.String())
		if err != nil {
			continue
		}
		hdr, err := AppendUDPHeader(buf[:0:262], AddrFrom(src))
		if err != nil {
			continue
		}
		// The header goes in front of the payload, in the same buffer.
		start := 262 - len(hdr)
		copy(buf[start:], hdr)
		a.act.Touch()
		a.local.WriteToUDPAddrPort(buf[start:262+n], a.client)
	}
}
