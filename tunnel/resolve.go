package tunnel

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/fips-go/fips-go/internal/engine/dnsclient"
)

// newResolver answers from hosts, then asks the configuration's name
// servers in order, through the tunnel, completing names without a dot
// with its search domains. Nothing of the host's (/etc/hosts,
// resolv.conf) takes part.
func (t *Tunnel) newResolver(servers []netip.Addr, hosts map[string][]netip.Addr) *dnsclient.Resolver {
	aps := make([]netip.AddrPort, len(servers))
	for i, s := range servers {
		aps[i] = netip.AddrPortFrom(s, 53)
	}
	return dnsclient.New(dnsclient.Config{Servers: aps, Search: t.search, Hosts: hosts, Dial: t.dial})
}

// LookupNetIP looks host up as the tunnel's configuration says; network
// is "ip", "ip4" or "ip6". An IP address is returned as it is; a name in
// Options.Hosts gets its addresses there; any other name is asked of the
// configuration's DNS servers through the tunnel, in order (each has 2 s
// to answer before the next is asked), a name without a dot first in
// each search domain. IPv4 addresses come first. A name neither in Hosts
// nor askable for want of servers fails with ErrNoDNS; a failed lookup
// is a *net.DNSError naming the tunnel's server that said so.
func (t *Tunnel) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if err := t.stopped(); err != nil {
		return nil, fmt.Errorf("tunnel: lookup %s: %w", host, err)
	}
	got, err := t.resolver.LookupNetIP(ctx, network, host)
	if errors.Is(err, dnsclient.ErrNoServers) {
		return nil, fmt.Errorf("tunnel: lookup %s: %w", host, ErrNoDNS)
	}
	if err != nil {
		return nil, err
	}
	for i := range got {
		got[i] = got[i].Unmap()
	}
	return got, nil
}

// LookupHost is LookupNetIP for both families, as strings.
func (t *Tunnel) LookupHost(ctx context.Context, host string) ([]string, error) {
	addrs, err := t.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a.String()
	}
	return out, nil
}
