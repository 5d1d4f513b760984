package rootless

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/fips-go/fips-go/internal/proxy"
	"github.com/fips-go/fips-go/tun/netstack"
)

// TunnelResolver resolves names with the name servers inside the tunnel,
// reached through ns, to an address of a family the tunnel has (addrs are
// its own addresses), IPv4 first. It is nil when there are no servers.
func TunnelResolver(ns *netstack.Net, servers []netip.Addr, addrs []netip.Addr) proxy.Resolver {
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
	have4, have6 := families(addrs)
	return func(ctx context.Context, host string) (netip.Addr, error) {
		got, err := r.LookupNetIP(ctx, "ip", host)
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
