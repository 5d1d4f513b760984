// Package rootless runs WireGuard tunnels without root: port forwards,
// proxies and the tunnel's resolver over a userspace TCP/IP stack, and
// commands in a user and network namespace of their own.
package rootless

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/fips-go/fips-go/internal/app/proxy"
	"github.com/fips-go/fips-go/internal/app/proxy/httpproxy"
	"github.com/fips-go/fips-go/internal/app/proxy/socks5"
	"github.com/fips-go/fips-go/internal/engine/dnsclient"
	"github.com/fips-go/fips-go/tun/netstack"
)

// Forward is a local TCP or UDP port into the tunnel.
type Forward struct {
	UDP    bool
	Local  string         // [host:]port to listen on here
	Remote netip.AddrPort // what each connection or flow reaches in the tunnel
}

// Reverse is a TCP or UDP port inside the tunnel to a local address.
type Reverse struct {
	UDP   bool
	Port  uint16 // listened on at each of the tunnel's IP families
	Local string // [host:]port each connection or flow reaches here
}

// Options configure the services. The zero value starts none.
type Options struct {
	Forwards []Forward
	Reverses []Reverse
	// SOCKS5 and HTTP are listen addresses for the proxies ("" for none).
	SOCKS5, HTTP string
	// SOCKS5User and SOCKS5Password, when set, are required of SOCKS5
	// clients (RFC 1929).
	SOCKS5User, SOCKS5Password string
	// DNS are the name servers inside the tunnel that the proxies resolve
	// host names with, in order (none: the proxies take addresses only);
	// DNSSearch the domains a name without a dot is tried in first.
	DNS       []netip.Addr
	DNSSearch []string
	// MaxConns caps the connections (and UDP flows) open at once, per
	// proxy and across the forwards (default proxy.DefaultMaxConns).
	MaxConns int
	// IdleTimeout closes connections and UDP flows idle this long
	// (default proxy.DefaultIdleTimeout).
	IdleTimeout time.Duration
	// Logf receives operational messages; Notef what a user should see,
	// such as the addresses listened on. nil discards.
	Logf, Notef func(format string, args ...any)
}

func (o *Options) setDefaults() {
	o.MaxConns = cmp.Or(o.MaxConns, proxy.DefaultMaxConns)
	o.IdleTimeout = cmp.Or(o.IdleTimeout, proxy.DefaultIdleTimeout)
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Notef == nil {
		o.Notef = func(string, ...any) {}
	}
}

// Services are the listeners started on one stack; Close stops them.
type Services struct {
	ns      *netstack.Net
	addrs   []netip.Addr // the stack's own addresses
	o       Options
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	lim     *proxy.Limiter // shared by the forwards
	closers []func()
	locals  []net.Addr     // Forwards in order, then SOCKS5, then HTTP
	socks   *socks5.Server // nil without --socks5
}

// Start starts the services o asks for on ns, whose tunnel addresses are
// addrs. On error none is left running.
func Start(ctx context.Context, ns *netstack.Net, addrs []netip.Addr, o Options) (*Services, error) {
	o.setDefaults()
	s := &Services{ns: ns, addrs: addrs, o: o, lim: proxy.NewLimiter(o.MaxConns)}
	s.ctx, s.cancel = context.WithCancel(ctx)
	for _, start := range []func() error{s.forwards, s.reverses, s.proxies} {
		if err := start(); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Addrs are the local listen addresses: the Forwards in order, then the
// SOCKS5 proxy's, then the HTTP proxy's.
func (s *Services) Addrs() []net.Addr { return s.locals }

// SOCKS5Stats are the SOCKS5 proxy's refusals and drops; false when no
// SOCKS5 proxy runs.
func (s *Services) SOCKS5Stats() (socks5.Stats, bool) {
	if s.socks == nil {
		return socks5.Stats{}, false
	}
	return s.socks.Stats(), true
}

// Close closes the listeners in the reverse order of their start, ends
// the connections they carry, and waits for their goroutines.
func (s *Services) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
	s.cancel()
	s.wg.Wait()
}

func (s *Services) forwards() error {
	for _, f := range s.o.Forwards {
		if f.UDP {
			pc, err := net.ListenPacket("udp", f.Local)
			if err != nil {
				return fmt.Errorf("forward udp %s: %w", f.Local, err)
			}
			s.closers = append(s.closers, func() { pc.Close() })
			s.locals = append(s.locals, pc.LocalAddr())
			s.o.Notef("forwarding udp %v to %v", pc.LocalAddr(), f.Remote)
			s.wg.Go(func() { serveUDPForward(s.ctx, pc.(*net.UDPConn), s.ns, f.Remote, s.lim, s.o) })
			continue
		}
		ln, err := net.Listen("tcp", f.Local)
		if err != nil {
			return fmt.Errorf("forward %s: %w", f.Local, err)
		}
		s.closers = append(s.closers, func() { ln.Close() })
		s.locals = append(s.locals, ln.Addr())
		s.o.Notef("forwarding tcp %v to %v", ln.Addr(), f.Remote)
		s.wg.Go(func() { serveForward(s.ctx, ln, s.ns, f.Remote, s.lim, s.o) })
	}
	return nil
}

func (s *Services) reverses() error {
	for _, r := range s.o.Reverses {
		if r.UDP {
			pcs, err := listenEachFamily(s.addrs, r.Port, "reverse udp forward", s.ns.ListenUDPAddrPort)
			if err != nil {
				return err
			}
			for _, pc := range pcs {
				s.o.Notef("forwarding udp %v in the tunnel to %s", pc.LocalAddr(), r.Local)
				s.closers = append(s.closers, func() { pc.Close() })
				s.wg.Go(func() { serveUDPReverse(s.ctx, pc, r.Local, s.lim, s.o) })
			}
			continue
		}
		lns, err := listenEachFamily(s.addrs, r.Port, "reverse forward", s.ns.ListenTCPAddrPort)
		if err != nil {
			return err
		}
		for _, ln := range lns {
			s.o.Notef("forwarding tcp %v in the tunnel to %s", ln.Addr(), r.Local)
			s.closers = append(s.closers, func() { ln.Close() })
			s.wg.Go(func() { serveReverse(s.ctx, ln, r.Local, s.lim, s.o) })
		}
	}
	return nil
}

func (s *Services) proxies() error {
	o, ns := s.o, s.ns
	resolve := s.resolver()
	dial := func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) { return ns.DialTCPAddrPort(ctx, ap) }
	if o.SOCKS5 != "" {
		ln, err := net.Listen("tcp", o.SOCKS5)
		if err != nil {
			return fmt.Errorf("SOCKS5 proxy on %s: %w", o.SOCKS5, err)
		}
		s.closers = append(s.closers, func() { ln.Close() })
		s.locals = append(s.locals, ln.Addr())
		srv := socks5.New(socks5.Options{
			Dial: dial, Resolve: resolve, Username: o.SOCKS5User, Password: o.SOCKS5Password,
			ListenUDP: func(v6 bool) (net.PacketConn, error) {
				unspec := netip.IPv4Unspecified()
				if v6 {
					unspec = netip.IPv6Unspecified()
				}
				return ns.ListenUDPAddrPort(netip.AddrPortFrom(unspec, 0))
			},
			MaxConns: o.MaxConns, IdleTimeout: o.IdleTimeout, Logf: o.Logf,
		})
		s.socks = srv
		s.wg.Go(func() { srv.Serve(s.ctx, ln) })
		o.Notef("SOCKS5 proxy (CONNECT, UDP ASSOCIATE) on %v", ln.Addr())
	}
	if o.HTTP != "" {
		ln, err := net.Listen("tcp", o.HTTP)
		if err != nil {
			return fmt.Errorf("HTTP proxy on %s: %w", o.HTTP, err)
		}
		s.closers = append(s.closers, func() { ln.Close() })
		s.locals = append(s.locals, ln.Addr())
		srv := httpproxy.New(httpproxy.Options{Dial: dial, Resolve: resolve, MaxConns: o.MaxConns, IdleTimeout: o.IdleTimeout, Logf: o.Logf})
		s.wg.Go(func() { srv.Serve(s.ctx, ln) })
		o.Notef("HTTP proxy on %v", ln.Addr())
	}
	return nil
}

// resolver resolves names with the tunnel's name servers and search
// domains, asked through the stack and nothing of the host's, to one
// address of a family the tunnel has, IPv4 first. It is nil without
// servers.
func (s *Services) resolver() proxy.Resolver {
	if len(s.o.DNS) == 0 {
		return nil
	}
	servers := make([]netip.AddrPort, len(s.o.DNS))
	for i, a := range s.o.DNS {
		servers[i] = netip.AddrPortFrom(a, 53)
	}
	ns := s.ns
	r := dnsclient.New(dnsclient.Config{Servers: servers, Search: s.o.DNSSearch,
		Dial: func(ctx context.Context, network string, ap netip.AddrPort) (net.Conn, error) {
			return ns.DialContext(ctx, network, ap.String())
		}})
	have4, have6 := families(s.addrs)
	network := "ip" // only the families the tunnel has are asked for
	switch {
	case have4 && !have6:
		network = "ip4"
	case have6 && !have4:
		network = "ip6"
	}
	return func(ctx context.Context, host string) (netip.Addr, error) {
		got, err := r.LookupNetIP(ctx, network, host)
		if err != nil {
			return netip.Addr{}, err
		}
		for _, want6 := range []bool{false, true} {
			for _, a := range got {
				a = a.Unmap()
				if a.Is6() == want6 && ((want6 && have6) || (!want6 && have4)) {
					return a, nil
				}
			}
		}
		return netip.Addr{}, fmt.Errorf("%s has no address of the tunnel's IP families", host)
	}
}
