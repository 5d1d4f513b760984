package cli

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fips-go/fips-go/proxy"
	"github.com/fips-go/fips-go/proxy/httpproxy"
	"github.com/fips-go/fips-go/proxy/socks5"
	"github.com/fips-go/fips-go/tun/netstack"
)

// The netstack modes of `fips-go userspace`: proxies, port forwards and
// ping over the userspace TCP/IP stack, no namespaces needed.

// forward is one -L: a local TCP or UDP port into the tunnel.
type forward struct {
	udp    bool
	local  string
	remote netip.AddrPort
}

// reverse is one -R: a TCP port inside the tunnel to a local address.
type reverse struct {
	port  uint16
	local string
}

// parseForward reads -L [tcp:|udp:][LOCAL=]REMOTE; a LOCAL without a host
// is on loopback, and no LOCAL means REMOTE's port on loopback.
func parseForward(s string) (forward, error) {
	var f forward
	rest := s
	if v, ok := strings.CutPrefix(rest, "udp:"); ok {
		f.udp, rest = true, v
	} else {
		rest = strings.TrimPrefix(rest, "tcp:")
	}
	local, remote, ok := strings.Cut(rest, "=")
	if !ok {
		local, remote = "", rest
	}
	ap, err := netip.ParseAddrPort(remote)
	if err != nil || ap.Port() == 0 {
		return f, fmt.Errorf("-L %q: want [tcp:|udp:][LOCAL=]REMOTE with REMOTE an ip:port, e.g. udp:127.0.0.1:5353=10.0.0.1:53", s)
	}
	if local == "" {
		local = strconv.Itoa(int(ap.Port()))
	}
	f.local, f.remote = proxy.LoopbackDefault(local), ap
	return f, nil
}

// parseReverse reads -R REMOTE_PORT=LOCAL.
func parseReverse(s string) (reverse, error) {
	port, local, ok := strings.Cut(s, "=")
	p, err := strconv.ParseUint(port, 10, 16)
	if !ok || err != nil || p == 0 || local == "" {
		return reverse{}, fmt.Errorf("-R %q: want REMOTE_PORT=LOCAL, e.g. 8080=127.0.0.1:80", s)
	}
	return reverse{port: uint16(p), local: proxy.LoopbackDefault(local)}, nil
}

// tunnelResolver resolves names with the tunnel's DNS servers, reached
// through the stack; nil when there are none.
func tunnelResolver(ns *netstack.Net, servers []netip.Addr, addrs []netip.Addr) proxy.Resolver {
	if len(servers) == 0 {
		return nil
	}
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var last error
		for _, s := range servers {
			c, err := ns.DialContext(ctx, network, netip.AddrPortFrom(s, 53).String())
			if err == nil {
				return c, nil
			}
			last = err
		}
		return nil, last
	}}
	var have4, have6 bool
	for _, a := range addrs {
		have4, have6 = have4 || a.Is4(), have6 || a.Is6()
	}
	return func(ctx context.Context, host string) (netip.Addr, error) {
		got, err := r.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return netip.Addr{}, err
		}
		// The first address of a family the tunnel has, IPv4 first.
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

// services are the listeners of the netstack modes; close undoes start
// in reverse.
type services struct {
	ns      *netstack.Net
	o       userspaceOptions
	wg      *sync.WaitGroup
	lim     *proxy.Limiter // shared by the forwards
	closers []func()
	locals  []net.Addr // -L in order, then SOCKS5, then HTTP
}

func (s *services) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// netstackServices starts what the options ask for on ns and returns the
// local listen addresses (-L in order, then SOCKS5, then HTTP) and the
// function that closes them.
func netstackServices(ctx context.Context, wg *sync.WaitGroup, ns *netstack.Net, o userspaceOptions) ([]net.Addr, func(), error) {
	s := &services{ns: ns, o: o, wg: wg, lim: proxy.NewLimiter(o.maxConns)}
	for _, start := range []func(context.Context) error{s.forwards, s.reverses, s.proxies} {
		if err := start(ctx); err != nil {
			s.close()
			return nil, nil, err
		}
	}
	return s.locals, s.close, nil
}

func (s *services) forwards(ctx context.Context) error {
	for _, f := range s.o.forwards {
		if f.udp {
			pc, err := net.ListenPacket("udp", f.local)
			if err != nil {
				return fmt.Errorf("-L udp:%s: %w", f.local, err)
			}
			s.closers = append(s.closers, func() { pc.Close() })
			s.locals = append(s.locals, pc.LocalAddr())
			s.o.notef("forwarding udp %v to %v", pc.LocalAddr(), f.remote)
			s.wg.Go(func() { serveUDPForward(ctx, pc.(*net.UDPConn), s.ns, f.remote, s.lim, s.o) })
			continue
		}
		ln, err := net.Listen("tcp", f.local)
		if err != nil {
			return fmt.Errorf("-L %s: %w", f.local, err)
		}
		s.closers = append(s.closers, func() { ln.Close() })
		s.locals = append(s.locals, ln.Addr())
		s.o.notef("forwarding tcp %v to %v", ln.Addr(), f.remote)
		s.wg.Go(func() { serveForward(ctx, ln, s.ns, f.remote, s.lim, s.o) })
	}
	return nil
}

func (s *services) reverses(ctx context.Context) error {
	for _, r := range s.o.reverses {
		lns, err := reverseListeners(s.ns, s.o.addrs, r.port)
		if err != nil {
			return err
		}
		for _, ln := range lns {
			s.o.notef("forwarding tcp %v in the tunnel to %s", ln.Addr(), r.local)
			s.closers = append(s.closers, func() { ln.Close() })
			s.wg.Go(func() { serveReverse(ctx, ln, r.local, s.lim, s.o) })
		}
	}
	return nil
}

func (s *services) proxies(ctx context.Context) error {
	o, ns := s.o, s.ns
	resolve := tunnelResolver(ns, o.dns, o.addrs)
	dial := func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) { return ns.DialTCPAddrPort(ctx, ap) }
	if o.socks5 != "" {
		ln, err := net.Listen("tcp", o.socks5)
		if err != nil {
			return fmt.Errorf("--socks5 %s: %w", o.socks5, err)
		}
		s.closers = append(s.closers, func() { ln.Close() })
		s.locals = append(s.locals, ln.Addr())
		user, pass, _ := strings.Cut(o.socks5Auth, ":")
		srv := socks5.New(socks5.Options{
			Dial: dial, Resolve: resolve, Username: user, Password: pass,
			ListenUDP: func(v6 bool) (net.PacketConn, error) {
				unspec := netip.IPv4Unspecified()
				if v6 {
					unspec = netip.IPv6Unspecified()
				}
				return ns.ListenUDPAddrPort(netip.AddrPortFrom(unspec, 0))
			},
			MaxConns: o.maxConns, IdleTimeout: o.idle, Logf: o.logf,
		})
		s.wg.Go(func() { srv.Serve(ctx, ln) })
		o.notef("SOCKS5 proxy (CONNECT, UDP ASSOCIATE) on %v", ln.Addr())
	}
	if o.httpProxy != "" {
		ln, err := net.Listen("tcp", o.httpProxy)
		if err != nil {
			return fmt.Errorf("--http %s: %w", o.httpProxy, err)
		}
		s.closers = append(s.closers, func() { ln.Close() })
		s.locals = append(s.locals, ln.Addr())
		srv := httpproxy.New(httpproxy.Options{Dial: dial, Resolve: resolve, MaxConns: o.maxConns, IdleTimeout: o.idle, Logf: o.logf})
		s.wg.Go(func() { srv.Serve(ctx, ln) })
		o.notef("HTTP proxy on %v", ln.Addr())
	}
	return nil
}

// serveForward accepts local connections and splices each to a connection
// to remote inside the tunnel.
func serveForward(ctx context.Context, ln net.Listener, ns *netstack.Net, remote netip.AddrPort, lim *proxy.Limiter, o userspaceOptions) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if !lim.TryAcquire() {
			o.logf("forward to %v: refusing %v: %d connections open (the limit)", remote, c.RemoteAddr(), lim.Cap())
			c.Close()
			continue
		}
		go func() {
			defer lim.Release()
			defer c.Close()
			dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			r, err := ns.DialTCPAddrPort(dctx, remote)
			cancel()
			if err != nil {
				o.logf("forward to %v: %v", remote, err)
				return
			}
			proxy.Splice(ctx, c, r, o.idle)
		}()
	}
}

// reverseListeners listens on port on each IP family the tunnel has.
func reverseListeners(ns *netstack.Net, addrs []netip.Addr, port uint16) ([]net.Listener, error) {
	var out []net.Listener
	var have4, have6 bool
	for _, a := range addrs {
		have4, have6 = have4 || a.Is4(), have6 || a.Is6()
	}
	for _, fam := range []struct {
		ok  bool
		any netip.Addr
	}{{have4, netip.IPv4Unspecified()}, {have6, netip.IPv6Unspecified()}} {
		if !fam.ok {
			continue
		}
		ln, err := ns.ListenTCPAddrPort(netip.AddrPortFrom(fam.any, port))
		if err != nil {
			for _, l := range out {
				l.Close()
			}
			return nil, fmt.Errorf("-R %d: listen in the tunnel: %w", port, err)
		}
		out = append(out, ln)
	}
	return out, nil
}

// serveReverse accepts connections inside the tunnel and splices each to
// a connection to local.
func serveReverse(ctx context.Context, ln net.Listener, local string, lim *proxy.Limiter, o userspaceOptions) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if !lim.TryAcquire() {
			o.logf("-R to %s: refusing %v: %d connections open (the limit)", local, c.RemoteAddr(), lim.Cap())
			c.Close()
			continue
		}
		go func() {
			defer lim.Release()
			defer c.Close()
			r, err := net.DialTimeout("tcp", local, 20*time.Second)
			if err != nil {
				o.logf("-R to %s: %v", local, err)
				return
			}
			proxy.Splice(ctx, c, r, o.idle)
		}()
	}
}
