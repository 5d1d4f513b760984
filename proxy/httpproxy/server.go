package httpproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/fips-go/fips-go/proxy"
)

// Defaults for zero Options fields.
const (
	DefaultHeaderTimeout = 10 * time.Second
	maxHeaderBytes       = 64 << 10
	maxRefusing          = 16
	maxIdleUpstream      = 32
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

// Server is an HTTP proxy.
type Server struct {
	opts      Options
	lim       *proxy.Limiter
	refusing  *proxy.Limiter
	transport *http.Transport
	ctx       context.Context // Serve's: ends the CONNECT tunnels with it
}

// New returns a server with o's zero fields defaulted.
func New(o Options) *Server {
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = proxy.DefaultIdleTimeout
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	s := &Server{opts: o, lim: proxy.NewLimiter(o.MaxConns), refusing: proxy.NewLimiter(maxRefusing), ctx: context.Background()}
	s.transport = &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			ap, err := proxy.ResolveHostPort(ctx, addr, o.Resolve)
			if err != nil {
				return nil, err
			}
			return o.Dial(ctx, ap)
		},
		MaxIdleConns:          maxIdleUpstream,
		IdleConnTimeout:       o.IdleTimeout,
		ResponseHeaderTimeout: o.IdleTimeout,
		DisableCompression:    true,
	}
	return s
}

// Serve serves ln until ctx ends or ln fails.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.ctx = ctx
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: DefaultHeaderTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	stop := context.AfterFunc(ctx, func() { hs.Close() })
	defer stop()
	err := hs.Serve(&limitListener{Listener: ln, s: s})
	s.transport.CloseIdleConnections()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t, err := ParseTarget(r.Method, r.RequestURI)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if r.Method == http.MethodConnect {
		s.connect(w, r, t)
		return
	}
	s.forward(w, r)
}

func (s *Server) connect(w http.ResponseWriter, r *http.Request, t Target) {
	ctx, cancel := context.WithTimeout(r.Context(), DefaultHeaderTimeout)
	defer cancel()
	ap, err := proxy.ResolveHost(ctx, t.Host, t.Port, s.opts.Resolve)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	up, err := s.opts.Dial(ctx, ap)
	if err != nil {
		s.opts.Logf("http: CONNECT %v: %v", t, err)
		http.Error(w, fmt.Sprintf("connect %v: %v", ap, err), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "cannot take over the connection", http.StatusInternalServerError)
		return
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		c.Close()
		up.Close()
		return
	}
	// Bytes the client sent after its request are already buffered.
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		if _, err := up.Write(b); err != nil {
			c.Close()
			up.Close()
			return
		}
	}
	proxy.Splice(s.ctx, c, up, s.opts.IdleTimeout)
}

func (s *Server) forward(w http.ResponseWriter, r *http.Request) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Close = false
	RemoveHopByHop(out.Header)
	if r.ContentLength == 0 {
		out.Body = nil
	}
	resp, err := s.transport.RoundTrip(out)
	if err != nil {
		s.opts.Logf("http: %s %s: %v", r.Method, r.URL, err)
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	RemoveHopByHop(resp.Header)
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	buf := make([]byte, 64<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return
			}
		}
		if rerr != nil {
			return
		}
	}
}

// limitListener refuses connections over the limit with a 503.
type limitListener struct {
	net.Listener
	s *Server
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.s.lim.TryAcquire() {
			return &limitedConn{Conn: c, release: l.s.lim.Release}, nil
		}
		l.s.opts.Logf("http: refusing %v: %d connections open (the limit)", c.RemoteAddr(), l.s.lim.Cap())
		if !l.s.refusing.TryAcquire() {
			c.Close()
			continue
		}
		go func() {
			defer l.s.refusing.Release()
			c.SetWriteDeadline(time.Now().Add(2 * time.Second))
			body := fmt.Sprintf("fips-go: too many connections (limit %d)\n", l.s.lim.Cap())
			fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			proxy.CloseGently(c)
		}()
	}
}

// limitedConn gives its slot back on the first Close.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite passes half-closes on to the TCP connection.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
