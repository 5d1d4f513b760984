package rootless

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/fips-go/fips-go/internal/app/proxy"
	"github.com/fips-go/fips-go/tun/netstack"
)

// serveForward accepts local connections and splices each to a connection
// to remote inside the tunnel.
func serveForward(ctx context.Context, ln net.Listener, ns *netstack.Net, remote netip.AddrPort, lim *proxy.Limiter, o Options) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if !lim.TryAcquire() {
			o.Logf("forward to %v: refusing %v: %d connections open (the limit)", remote, c.RemoteAddr(), lim.Cap())
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
				o.Logf("forward to %v: %v", remote, err)
				return
			}
			proxy.Splice(ctx, c, r, o.IdleTimeout)
		}()
	}
}

// listenEachFamily opens port on the unspecified address of each IP family
// the tunnel has, with listen (a TCP listener or a UDP socket in the
// netstack); on an error it closes what it opened.
func listenEachFamily[L io.Closer](addrs []netip.Addr, port uint16, what string, listen func(netip.AddrPort) (L, error)) ([]L, error) {
	var out []L
	have4, have6 := families(addrs)
	for _, fam := range []struct {
		ok  bool
		any netip.Addr
	}{{have4, netip.IPv4Unspecified()}, {have6, netip.IPv6Unspecified()}} {
		if !fam.ok {
			continue
		}
		l, err := listen(netip.AddrPortFrom(fam.any, port))
		if err != nil {
			for _, o := range out {
				o.Close()
			}
			return nil, fmt.Errorf("%s of port %d: listen in the tunnel: %w", what, port, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// families reports which IP families addrs hold.
func families(addrs []netip.Addr) (have4, have6 bool) {
	for _, a := range addrs {
		have4, have6 = have4 || a.Is4(), have6 || a.Is6()
	}
	return have4, have6
}

// serveReverse accepts connections inside the tunnel and splices each to
// a connection to local.
func serveReverse(ctx context.Context, ln net.Listener, local string, lim *proxy.Limiter, o Options) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if !lim.TryAcquire() {
			o.Logf("reverse forward to %s: refusing %v: %d connections open (the limit)", local, c.RemoteAddr(), lim.Cap())
			c.Close()
			continue
		}
		go func() {
			defer lim.Release()
			defer c.Close()
			r, err := net.DialTimeout("tcp", local, 20*time.Second)
			if err != nil {
				o.Logf("reverse forward to %s: %v", local, err)
				return
			}
			proxy.Splice(ctx, c, r, o.IdleTimeout)
		}()
	}
}
