package httpproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/fips-go/fips-go/internal/app/connslots"
	"github.com/fips-go/fips-go/internal/app/http1"
	"github.com/fips-go/fips-go/internal/app/proxy"
)

// Defaults for zero Options fields, and limits.
const (
	// DefaultHeaderTimeout bounds reading a request head, and dialing.
	DefaultHeaderTimeout = 10 * time.Second
	maxHeaderBytes       = 64 << 10
	// maxRefusing bounds the connections being told "no" at once when the
	// server is full; beyond it they are closed without a word.
	maxRefusing = 16
	// replyTimeout bounds writing an error reply to a client.
	replyTimeout = 2 * time.Second
)

// Options configure a Server; Dial is required.
type Options struct {
	// Dial connects to addr through the tunnel.
	Dial func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	// Resolve resolves names; nil makes names an error.
	Resolve proxy.Resolver
	// MaxConns bounds client connections; default proxy.DefaultMaxConns.
	MaxConns int
	// IdleTimeout closes tunnels and keep-alive connections that moved
	// nothing for this long; default proxy.DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Logf receives errors of single requests; nil discards.
	Logf func(format string, args ...any)
}

// Server is an HTTP/1.1 proxy.
type Server struct {
	opts     Options
	lim      *connslots.Slots
	refusing *proxy.Limiter
}

// New returns a server with o's zero fields defaulted.
func New(o Options) *Server {
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = proxy.DefaultIdleTimeout
	}
	if o.MaxConns <= 0 {
		o.MaxConns = proxy.DefaultMaxConns
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return &Server{opts: o, lim: connslots.New(o.MaxConns), refusing: proxy.NewLimiter(maxRefusing)}
}

// Serve accepts connections on ln until ctx ends (then it returns nil) or
// ln fails. Either way it closes ln and every connection it opened, and
// waits for their handlers.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	// Deferred after the wait, so it runs first: when ln fails, the
	// handlers end too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(ctx, func() { ln.Close() })()
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// Out of file descriptors and the like pass; wait and retry.
			if te, ok := err.(interface{ Temporary() bool }); ok && te.Temporary() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.opts.Logf("http: accept: %v; retrying in %v", err, backoff)
				select {
				case <-time.After(backoff):
				case <-ctx.Done():
				}
				continue
			}
			ln.Close()
			return err
		}
		backoff = 0
		slot, ok := s.lim.Acquire(func() { c.Close() })
		if !ok {
			s.refuse(ctx, &wg, c)
			continue
		}
		wg.Go(func() {
			defer slot.Release()
			s.handle(ctx, c, slot)
		})
	}
}

// refuse answers a client over the limit with a 503, unless too many are
// being refused already.
func (s *Server) refuse(ctx context.Context, wg *sync.WaitGroup, c net.Conn) {
	s.opts.Logf("http: refusing %v: %d connections open (the limit)", c.RemoteAddr(), s.lim.Cap())
	if !s.refusing.TryAcquire() {
		c.Close()
		return
	}
	wg.Go(func() {
		defer s.refusing.Release()
		defer context.AfterFunc(ctx, func() { c.Close() })()
		cc := newClientConn(c)
		cc.fail(503, fmt.Sprintf("too many connections (limit %d)", s.lim.Cap()))
	})
}

// clientConn is a client's connection and its buffers.
type clientConn struct {
	raw net.Conn   // as accepted: for deadlines, half-close and Splice
	tc  *timedConn // raw, with the body transfers' idle deadlines
	br  *bufio.Reader
	bw  *bufio.Writer
}

func newClientConn(c net.Conn) *clientConn {
	tc := &timedConn{Conn: c}
	return &clientConn{raw: c, tc: tc, br: bufio.NewReaderSize(tc, 4<<10), bw: bufio.NewWriterSize(tc, 4<<10)}
}

// handle serves one client connection: requests one after another until
// one needs the connection closed, or a CONNECT takes it over. While it
// waits for a request's first byte its slot is idle, and a new connection
// at the cap may close it.
func (s *Server) handle(ctx context.Context, c net.Conn, slot *connslots.Slot) {
	defer c.Close()
	// net/http recovered a handler's panic too: a bug here costs this
	// client its connection, not the process its tunnel.
	defer func() {
		if r := recover(); r != nil {
			s.opts.Logf("http: panic serving %v (a bug; its connection is closed): %v\n%s", c.RemoteAddr(), r, debug.Stack())
		}
	}()
	// Shutting down ends every wait on the client, so Serve's is short.
	defer context.AfterFunc(ctx, func() { c.Close() })()
	cc := newClientConn(c)
	for first := true; ; first = false {
		req, err := s.readRequest(cc, first, slot)
		if err != nil {
			return
		}
		if req.Method == "CONNECT" {
			t, err := ParseTarget(req.Method, req.Target)
			if err != nil {
				cc.fail(400, err.Error())
				return
			}
			s.connect(ctx, cc, t)
			return
		}
		if !s.forward(ctx, cc, req) {
			return
		}
		slot.Idle()
	}
}

// readRequest reads and parses the next request head. The first must
// arrive within DefaultHeaderTimeout of the accept; later ones may wait
// IdleTimeout for their first byte and then DefaultHeaderTimeout. On an
// error the client has been answered, if it could be.
func (s *Server) readRequest(cc *clientConn, first bool, slot *connslots.Slot) (*request, error) {
	cc.tc.idle = 0
	wait := DefaultHeaderTimeout
	if !first {
		wait = s.opts.IdleTimeout
	}
	cc.raw.SetReadDeadline(time.Now().Add(wait))
	if _, err := cc.br.Peek(1); err != nil {
		return nil, err
	}
	if !slot.Busy() {
		return nil, net.ErrClosed // closed for a new connection meanwhile
	}
	if !first {
		cc.raw.SetReadDeadline(time.Now().Add(DefaultHeaderTimeout))
	}
	head, err := http1.ReadHead(cc.br, maxHeaderBytes)
	if err == nil {
		var req *request
		if req, err = http1.ParseRequest(head); err == nil {
			cc.raw.SetReadDeadline(time.Time{})
			cc.tc.idle = s.opts.IdleTimeout
			return req, nil
		}
	}
	switch {
	case errors.Is(err, http1.ErrTooLarge):
		cc.fail(431, err.Error())
	case errors.Is(err, http1.ErrVersion):
		cc.fail(505, err.Error())
	case errors.Is(err, http1.ErrMalformed):
		cc.fail(400, err.Error())
	}
	return nil, err
}

// connect dials t and splices the client to it.
func (s *Server) connect(ctx context.Context, cc *clientConn, t Target) {
	up, err := s.dial(ctx, t)
	if err != nil {
		s.opts.Logf("http: CONNECT %v: %v", t, err)
		cc.fail(502, err.Error())
		return
	}
	c := cc.raw
	c.SetDeadline(time.Now().Add(s.opts.IdleTimeout))
	up.SetDeadline(time.Now().Add(s.opts.IdleTimeout))
	if _, err := c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		up.Close()
		return
	}
	// Bytes the client sent after its request (a TLS ClientHello, say)
	// are in our buffer already.
	if n := cc.br.Buffered(); n > 0 {
		b, _ := cc.br.Peek(n)
		if _, err := up.Write(b); err != nil {
			up.Close()
			return
		}
	}
	c.SetDeadline(time.Time{})
	up.SetDeadline(time.Time{})
	proxy.Splice(ctx, c, up, s.opts.IdleTimeout)
}

// dial resolves and dials t, within DefaultHeaderTimeout.
func (s *Server) dial(ctx context.Context, t Target) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultHeaderTimeout)
	defer cancel()
	ap, err := proxy.ResolveHost(ctx, t.Host, t.Port, s.opts.Resolve)
	if err != nil {
		return nil, err
	}
	up, err := s.opts.Dial(ctx, ap)
	if err != nil {
		return nil, fmt.Errorf("connect %v: %w", ap, err)
	}
	return up, nil
}

// fail answers the client with status and a text/plain msg and closes
// the connection. Only for a client that was sent nothing of a response
// yet.
func (cc *clientConn) fail(status int, msg string) {
	body := "fips-go: " + msg + "\n"
	h := Header{
		{Name: "Content-Type", Value: "text/plain; charset=utf-8"},
		{Name: "Content-Length", Value: strconv.Itoa(len(body))},
		{Name: "Connection", Value: "close"},
	}
	cc.tc.idle = 0
	cc.raw.SetWriteDeadline(time.Now().Add(replyTimeout))
	cc.bw.Write(append(http1.AppendResponseHead(nil, status, statusText(status), h), body...))
	if cc.bw.Flush() == nil {
		proxy.CloseGently(cc.raw)
	}
	cc.raw.Close()
}

// abort closes a client connection in the middle of a response with a
// reset where it can: for a body read until close, a clean end would
// tell the client that a truncated body was whole.
func (cc *clientConn) abort() {
	if tc, ok := cc.raw.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	cc.raw.Close()
}

func statusText(status int) string {
	switch status {
	case 400:
		return "Bad Request"
	case 431:
		return "Request Header Fields Too Large"
	case 501:
		return "Not Implemented"
	case 502:
		return "Bad Gateway"
	case 503:
		return "Service Unavailable"
	case 505:
		return "HTTP Version Not Supported"
	}
	return "Error"
}

// timedConn gives each Read and Write a deadline idle from its start, so
// a body transfer fails only after idle without progress; zero idle
// leaves the deadlines alone. Only the connection's handler uses it.
type timedConn struct {
	net.Conn
	idle time.Duration
}

func (c *timedConn) Read(p []byte) (int, error) {
	if c.idle > 0 {
		c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	}
	return c.Conn.Read(p)
}

func (c *timedConn) Write(p []byte) (int, error) {
	if c.idle > 0 {
		c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
	}
	return c.Conn.Write(p)
}
