package socks5

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/fips-go/fips-go/proxy"
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
	want   netip.AddrPort // the client's source as the request named it (parts may be zero)
	client netip.AddrPort // learned from the first datagram; then fixed

	mu     sync.Mutex        // guards tunnel and closed
	tunnel [2]net.PacketConn // [0] IPv4, [1] IPv6; opened on first use
	closed bool
	wg     sync.WaitGroup
}

// associate runs a UDP ASSOCIATE until the control connection ends or the
// association is idle. The relay binds to the address the client reached
// the listener on (loopback unless the user chose otherwise) and accepts
// datagrams only from the control connection's IP, and from the port the
// client named or the first one it used.
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
	if req.IP.IsValid() && !req.IP.IsUnspecified() && req.IP.Unmap() != a.want.Addr() {
		s.opts.Logf("socks5: udp associate from %v for %v: refused, not the client's address", rap, req)
		c.Write(AppendReply(nil, RepNotAllowed, Addr{}))
		pc.Close()
		return
	}
	a.want = netip.AddrPortFrom(a.want.Addr(), req.Port)
	bound, _ := netip.ParseAddrPort(pc.LocalAddr().String())
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
	a.fromClient()
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

// fromClient relays the client's datagrams into the tunnel.
func (a *association) fromClient() {
	buf := make([]byte, maxDatagram)
	for {
		n, from, err := a.local.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		if !a.fromClientAddr(from) {
			a.s.udpForeign.Add(1)
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

// fromClientAddr checks a datagram's source and learns the client's port
// from the first one.
func (a *association) fromClientAddr(from netip.AddrPort) bool {
	if from.Addr() != a.want.Addr() {
		return false
	}
	if a.client.IsValid() {
		return from == a.client
	}
	if a.want.Port() != 0 && from.Port() != a.want.Port() {
		return false
	}
	a.client = from
	return true
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
