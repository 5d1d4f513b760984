package tunnel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// dial connects to ap, whose family the caller has checked, without the
// round trip through a string that netstack's DialContext would take.
func (t *Tunnel) dial(ctx context.Context, network string, ap netip.AddrPort) (net.Conn, error) {
	if strings.HasPrefix(network, "tcp") {
		return t.net.DialTCPAddrPort(ctx, ap)
	}
	return t.net.DialUDPAddrPort(netip.AddrPort{}, ap)
}

// ipNetwork is the IP network ("ip", "ip4" or "ip6") of a "tcp" or "udp"
// network, or "" for any other network.
func ipNetwork(network string) string {
	switch network {
	case "tcp", "udp":
		return "ip"
	case "tcp4", "udp4":
		return "ip4"
	case "tcp6", "udp6":
		return "ip6"
	}
	return ""
}

// fits reports whether a is of the family ipnet names.
func fits(ipnet string, a netip.Addr) bool {
	return ipnet == "ip" || (ipnet == "ip4") == a.Is4()
}

// DialContext connects to address through the tunnel over network "tcp",
// "tcp4", "tcp6", "udp", "udp4" or "udp6", as net.Dialer.DialContext
// does. A host name is resolved as LookupNetIP does, and its addresses
// of the tunnel's IP families are tried in turn.
func (t *Tunnel) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	ipnet := ipNetwork(network)
	if ipnet == "" {
		return nil, fmt.Errorf("tunnel: dial: unknown network %q", network)
	}
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("tunnel: dial %s: %w", network, err)
	}
	port, err := net.LookupPort(network, portStr)
	if err != nil {
		return nil, fmt.Errorf("tunnel: dial %s %s: %w", network, address, err)
	}
	if host == "" {
		return nil, fmt.Errorf("tunnel: dial %s %s: no host", network, address)
	}
	addrs, err := t.LookupNetIP(ctx, ipnet, host)
	if err != nil {
		return nil, err
	}
	var first error
	for _, a := range addrs {
		if !t.hasFamily(a) || !fits(ipnet, a) {
			continue
		}
		c, err := t.dial(ctx, network, netip.AddrPortFrom(a, uint16(port)))
		if err == nil {
			return c, nil
		}
		first = cmp.Or(first, err)
	}
	if first == nil {
		first = fmt.Errorf("tunnel: dial %s %s: no address of the tunnel's IP families among %v", network, address, addrs)
	}
	return nil, first
}

// hasFamily reports whether the tunnel has an address of a's family.
func (t *Tunnel) hasFamily(a netip.Addr) bool {
	for _, own := range t.addrs {
		if own.Is4() == a.Is4() {
			return true
		}
	}
	return false
}

// listenAddr is address for Listen and ListenPacket: the host must be
// empty or an IP address (names are not resolved). An empty host is the
// unspecified address of the network's family, or for "tcp" and "udp" of
// IPv4 when the tunnel has an IPv4 address, else of IPv6.
func (t *Tunnel) listenAddr(network, address string) (netip.AddrPort, error) {
	ipnet := ipNetwork(network)
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return netip.AddrPort{}, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port %q: want a number", portStr)
	}
	if host != "" {
		a, err := netip.ParseAddr(host)
		if err != nil {
			return netip.AddrPort{}, errors.New("want an IP address, not a name")
		}
		a = a.Unmap()
		if !fits(ipnet, a) {
			return netip.AddrPort{}, fmt.Errorf("%v is of the other IP family", a)
		}
		return netip.AddrPortFrom(a, uint16(port)), nil
	}
	a := netip.IPv6Unspecified()
	if ipnet == "ip4" || (ipnet == "ip" && t.hasFamily(netip.IPv4Unspecified())) {
		a = netip.IPv4Unspecified()
	}
	return netip.AddrPortFrom(a, uint16(port)), nil
}

// Listen listens for TCP connections inside the tunnel; network is "tcp",
// "tcp4" or "tcp6", and address "ip:port" or ":port". Names are not
// resolved. ":port" listens on all the tunnel's addresses of one family:
// the network's, or for "tcp" IPv4 if the tunnel has an IPv4 address; a
// dual-stack server listens twice, with "tcp4" and "tcp6".
func (t *Tunnel) Listen(network, address string) (net.Listener, error) {
	if network != "tcp" && network != "tcp4" && network != "tcp6" {
		return nil, fmt.Errorf("tunnel: listen: unknown network %q", network)
	}
	ap, err := t.listenAddr(network, address)
	if err != nil {
		return nil, fmt.Errorf("tunnel: listen %s %s: %w", network, address, err)
	}
	return t.net.ListenTCPAddrPort(ap)
}

// ListenPacket opens a UDP socket inside the tunnel; network is "udp",
// "udp4" or "udp6", and address as for Listen.
func (t *Tunnel) ListenPacket(network, address string) (net.PacketConn, error) {
	if network != "udp" && network != "udp4" && network != "udp6" {
		return nil, fmt.Errorf("tunnel: listen: unknown network %q", network)
	}
	ap, err := t.listenAddr(network, address)
	if err != nil {
		return nil, fmt.Errorf("tunnel: listen %s %s: %w", network, address, err)
	}
	return t.net.ListenUDPAddrPort(ap)
}

// HTTPClient returns a client whose connections go through the tunnel,
// with host names resolved inside it. Clients share one transport, whose
// idle connections Close ends; no proxy from the environment applies.
func (t *Tunnel) HTTPClient() *http.Client {
	return &http.Client{Transport: t.transport}
}
