package socks5

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fips-go/fips-go/internal/app/connslots"
	"github.com/fips-go/fips-go/internal/app/proxy"
	"github.com/fips-go/fips-go/internal/app/sockowner"
)

// DefaultHandshakeTimeout bounds the greeting, authentication and request.
const DefaultHandshakeTimeout = 10 * time.Second

// maxRefusing bounds the connections being told "no" at once when the
// server is full; beyond it they are closed without a word.
const maxRefusing = 16

// Options configure a Server. Dial is required; without ListenUDP, UDP
// ASSOCIATE is refused.
type Options struct {
	// Dial connects to addr through the tunnel.
	Dial func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	// ListenUDP opens an unbound UDP socket on the tunnel's side for the
	// family of an IPv6 (v6) or IPv4 destination.
	ListenUDP func(v6 bool) (net.PacketConn, error)
	// Resolve resolves names in requests; nil makes names an error.
	Resolve proxy.Resolver
	// Username and Password, when Username is set, are required of
	// every client (RFC 1929).
	Username, Password string
	// MaxConns bounds the connections and UDP associations open at once;
	// default proxy.DefaultMaxConns.
	MaxConns int
	// IdleTimeout closes a connection or association that moved nothing
	// for this long; default proxy.DefaultIdleTimeout.
	IdleTimeout time.Duration
	// HandshakeTimeout; default DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// Logf receives errors of single connections; nil discards.
	Logf func(format string, args ...any)
}

// Stats count what the server refused or dropped.
type Stats struct {
	Refused         uint64 // connections refused: MaxConns reached
	ProtocolErrors  uint64 // connections closed for malformed input
	UDPForeign      uint64 // datagrams dropped: not from the client's address
	UDPWrongOwner   uint64 // datagrams dropped: sent by another local user's socket, or one whose owner is unknown
	UDPMalformed    uint64 // datagrams dropped: bad header or fragment
	UDPUnresolvable uint64 // datagrams dropped: destination did not resolve
}

// Server is a SOCKS5 server.
type Server struct {
	opts     Options
	lim      *connslots.Slots
	refusing *proxy.Limiter
	owner    ownerFunc // who owns a local socket; sockowner.Owner, a fake in tests

	refused, protoErrs, udpForeign, udpWrongOwner, udpMalformed, udpUnresolvable atomic.Uint64
}

// New returns a server with o's zero fields defaulted.
func New(o Options) *Server {
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = proxy.DefaultIdleTimeout
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.MaxConns <= 0 {
		o.MaxConns = proxy.DefaultMaxConns
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return &Server{opts: o, lim: connslots.New(o.MaxConns), refusing: proxy.NewLimiter(maxRefusing), owner: sockowner.Owner}
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	return Stats{Refused: s.refused.Load(), ProtocolErrors: s.protoErrs.Load(), UDPForeign: s.udpForeign.Load(),
		UDPWrongOwner: s.udpWrongOwner.Load(), UDPMalformed: s.udpMalformed.Load(), UDPUnresolvable: s.udpUnresolvable.Load()}
}

// Serve accepts connections on ln until ctx ends or ln fails, then closes
// ln and waits for its connections to end.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		slot, ok := s.lim.Acquire(func() { c.Close() })
		if !ok {
			s.refused.Add(1)
			s.opts.Logf("socks5: refusing %v: %d connections open (the limit)", c.RemoteAddr(), s.lim.Cap())
			if !s.refusing.TryAcquire() {
				c.Close()
				continue
			}
			wg.Go(func() {
				defer s.refusing.Release()
				s.refuse(c)
			})
			continue
		}
		wg.Go(func() {
			defer slot.Release()
			s.handle(ctx, c, slot)
		})
	}
}

// handshake runs the greeting and authentication; on failure the client
// has been told and c is to be closed.
func (s *Server) handshake(c net.Conn) error {
	methods, err := ReadGreeting(c)
	if err != nil {
		return err
	}
	want := byte(MethodNoAuth)
	if s.opts.Username != "" {
		want = MethodUserPass
	}
	offered := false
	for _, m := range methods {
		offered = offered || m == want
	}
	if !offered {
		c.Write([]byte{version, MethodNoAcceptable})
		return fmt.Errorf("client offers no acceptable method (want %d)", want)
	}
	if _, err := c.Write([]byte{version, want}); err != nil {
		return err
	}
	if want != MethodUserPass {
		return nil
	}
	u, p, err := ReadUserPass(c)
	if err != nil {
		return err
	}
	okU := subtle.ConstantTimeCompare([]byte(u), []byte(s.opts.Username))
	okP := subtle.ConstantTimeCompare([]byte(p), []byte(s.opts.Password))
	if okU&okP != 1 {
		c.Write([]byte{userPassVersion, 1})
		return errors.New("wrong username or password")
	}
	_, err = c.Write([]byte{userPassVersion, 0})
	return err
}

// refuse tells a client over the limit so, as a SOCKS reply.
func (s *Server) refuse(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if s.handshake(c) != nil {
		return
	}
	if _, err := ReadRequest(c); err != nil {
		return
	}
	c.Write(AppendReply(nil, RepGeneralFailure, Addr{}))
	proxy.CloseGently(c)
}

// handle serves a connection. Until the client's first byte its slot is
// idle, and a new connection at the cap may close it.
func (s *Server) handle(ctx context.Context, c net.Conn, slot *connslots.Slot) {
	defer c.Close()
	// A bug here costs this client its connection, not the process its
	// tunnel (the HTTP proxy and the metrics endpoint do the same).
	defer func() {
		if r := recover(); r != nil {
			s.opts.Logf("socks5: panic serving %v (a bug; its connection is closed): %v\n%s", c.RemoteAddr(), r, debug.Stack())
		}
	}()
	// Shutting down ends handshakes too, so Serve's wait is short.
	defer context.AfterFunc(ctx, func() { c.Close() })()
	c.SetDeadline(time.Now().Add(s.opts.HandshakeTimeout))
	hc := connslots.BusyOnRead(c, slot)
	err := s.handshake(hc)
	var req Request
	if err == nil {
		req, err = ReadRequest(hc)
	}
	if err != nil {
		if errors.Is(err, ErrProtocol) {
			s.protoErrs.Add(1)
			c.Write(AppendReply(nil, RepGeneralFailure, Addr{}))
			proxy.CloseGently(c)
		}
		s.opts.Logf("socks5: %v: %v", c.RemoteAddr(), err)
		return
	}
	switch req.Cmd {
	case CmdConnect:
		s.connect(ctx, c, req.Addr)
	case CmdUDPAssociate:
		if s.opts.ListenUDP == nil {
			c.Write(AppendReply(nil, RepCommandNotSupported, Addr{}))
			return
		}
		s.associate(ctx, c, req.Addr)
	default:
		s.protoErrs.Add(1)
		c.Write(AppendReply(nil, RepCommandNotSupported, Addr{}))
	}
}

func (s *Server) connect(ctx context.Context, c net.Conn, to Addr) {
	dctx, cancel := context.WithTimeout(ctx, s.opts.HandshakeTimeout)
	defer cancel()
	ap, err := s.resolve(dctx, to)
	if err != nil {
		s.opts.Logf("socks5: connect %v: %v", to, err)
		c.Write(AppendReply(nil, RepHostUnreachable, Addr{}))
		return
	}
	r, err := s.opts.Dial(dctx, ap)
	if err != nil {
		s.opts.Logf("socks5: connect %v: %v", ap, err)
		c.Write(AppendReply(nil, dialRep(err), Addr{}))
		return
	}
	bound := Addr{}
	if la, ok := netip.ParseAddrPort(r.LocalAddr().String()); ok == nil {
		bound = AddrFrom(la)
	}
	if _, err := c.Write(AppendReply(nil, RepSucceeded, bound)); err != nil {
		r.Close()
		return
	}
	c.SetDeadline(time.Time{})
	proxy.Splice(ctx, c, r, s.opts.IdleTimeout)
}

func (s *Server) resolve(ctx context.Context, a Addr) (netip.AddrPort, error) {
	if a.IP.IsValid() {
		return netip.AddrPortFrom(a.IP, a.Port), nil
	}
	return proxy.ResolveHost(ctx, a.Host, a.Port, s.opts.Resolve)
}

// dialRep maps a dial error to a reply code.
func dialRep(err error) byte {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(err.Error(), "refused"):
		return RepConnectionRefused
	case errors.Is(err, syscall.ENETUNREACH) || strings.Contains(err.Error(), "unreachable"):
		return RepNetworkUnreachable
	}
	return RepHostUnreachable
}
