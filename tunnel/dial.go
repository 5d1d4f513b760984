package tunnel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// dial connects to ap, whose family the caller has checked, without the
// round trip through a string that netstack's DialContext would take. An
// address no peer routes fails at once with ErrNoRoute.
func (t *Tunnel) dial(ctx context.Context, network string, ap netip.AddrPort) (net.Conn, error) {
	if err := t.stopped(); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: netAddr(network, ap), Err: err}
	}
	if !t.routes(ap.Addr()) {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: netAddr(network, ap), Err: ErrNoRoute}
	}
	var c net.Conn
	var err error
	if strings.HasPrefix(network, "tcp") {
		c, err = t.net.DialTCPAddrPort(ctx, ap)
	} else {
		c, err = t.net.DialUDPAddrPort(netip.AddrPort{}, ap)
	}
	return c, t.opError("dial", network, netAddr(network, ap), err)
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
// of the tunnel's IP families are tried in turn. An address no peer routes
// fails at once with ErrNoRoute; on a closed tunnel DialContext fails
// with net.ErrClosed.
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
	if err := t.stopped(); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: hostAddr{network, address}, Err: err}
	}
	addrs, err := t.LookupNetIP(ctx, ipnet, host)
	if err != nil {
		return nil, t.opError("dial", network, hostAddr{network, address}, err)
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

// listenAddrs are the addresses Listen and ListenPacket bind for address:
// its host must be empty or an IP address (names are not resolved). An
// IP must be one of the tunnel's, or the unspecified address of a family
// it has; an empty host is the unspecified address of the network's
// family, or for "tcp" and "udp" of each family the tunnel has, IPv4
// first.
func (t *Tunnel) listenAddrs(network, address string) ([]netip.AddrPort, error) {
	ipnet := ipNetwork(network)
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("port %q: want a number", portStr)
	}
	var want []netip.Addr
	if host != "" {
		a, err := netip.ParseAddr(host)
		if err != nil {
			return nil, errors.New("want an IP address, not a name")
		}
		a = a.Unmap()
		if !fits(ipnet, a) {
			return nil, fmt.Errorf("%v is of the other IP family", a)
		}
		if !a.IsUnspecified() && !t.isOwn(a) {
			return nil, fmt.Errorf("%v is not an address of the tunnel's (%v)", a, t.addrs)
		}
		want = []netip.Addr{a}
	} else {
		if ipnet != "ip6" {
			want = append(want, netip.IPv4Unspecified())
		}
		if ipnet != "ip4" {
			want = append(want, netip.IPv6Unspecified())
		}
	}
	var out []netip.AddrPort
	for _, a := range want {
		if t.hasFamily(a) {
			out = append(out, netip.AddrPortFrom(a, uint16(port)))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the tunnel has no address of the family (its addresses: %v)", t.addrs)
	}
	return out, nil
}

// shown is ap as a listener reports it: an unspecified address becomes
// the tunnel's first address of its family, one that reaches it.
func (t *Tunnel) shown(ap netip.AddrPort) netip.AddrPort {
	if !ap.Addr().IsUnspecified() {
		return ap
	}
	for _, own := range t.addrs {
		if own.Is4() == ap.Addr().Is4() {
			return netip.AddrPortFrom(own, ap.Port())
		}
	}
	return ap
}

// listenStart is where Listen and ListenPacket begin: network is of kind
// ("tcp" or "udp"), the tunnel is open, and address names the addresses
// to bind.
func (t *Tunnel) listenStart(kind, network, address string) ([]netip.AddrPort, error) {
	if network != kind && network != kind+"4" && network != kind+"6" {
		return nil, fmt.Errorf("tunnel: listen: unknown network %q", network)
	}
	opErr := func(err error) error {
		return &net.OpError{Op: "listen", Net: network, Addr: hostAddr{network, address}, Err: err}
	}
	if err := t.stopped(); err != nil {
		return nil, opErr(err)
	}
	aps, err := t.listenAddrs(network, address)
	if err != nil {
		return nil, fmt.Errorf("tunnel: %w", opErr(err))
	}
	return aps, nil
}

// Listen listens for TCP connections inside the tunnel; network is "tcp",
// "tcp4" or "tcp6", and address "ip:port" or ":port", where ip is one of
// the tunnel's addresses (names are not resolved). ":port" listens on all
// the tunnel's addresses: with "tcp" of both families when the tunnel has
// both (on one port), with "tcp4" or "tcp6" of that family; a family the
// tunnel has no address of is an error. Addr is a real address: for
// ":port", the tunnel's first address (IPv4 first) and the port.
func (t *Tunnel) Listen(network, address string) (net.Listener, error) {
	aps, err := t.listenStart("tcp", network, address)
	if err != nil {
		return nil, err
	}
	l, err := bindBoth(aps, func(ap netip.AddrPort) (net.Listener, uint16, error) {
		ln, err := t.net.ListenTCPAddrPort(ap)
		if err != nil {
			return nil, 0, err
		}
		return ln, uint16(ln.Addr().(*net.TCPAddr).Port), nil
	})
	if err != nil {
		return nil, t.opError("listen", network, hostAddr{network, address}, err)
	}
	return newListener(t, network, l), nil
}

// ListenPacket opens a UDP socket inside the tunnel; network is "udp",
// "udp4" or "udp6", and address as for Listen: "udp" with ":port" serves
// both families when the tunnel has both. WriteTo an address no peer
// routes fails with ErrNoRoute.
func (t *Tunnel) ListenPacket(network, address string) (net.PacketConn, error) {
	aps, err := t.listenStart("udp", network, address)
	if err != nil {
		return nil, err
	}
	pcs, err := bindBoth(aps, func(ap netip.AddrPort) (net.PacketConn, uint16, error) {
		pc, err := t.net.ListenUDPAddrPort(ap)
		if err != nil {
			return nil, 0, err
		}
		return pc, uint16(pc.LocalAddr().(*net.UDPAddr).Port), nil
	})
	if err != nil {
		return nil, t.opError("listen", network, hostAddr{network, address}, err)
	}
	return newPacketConn(t, network, pcs), nil
}

// bindBoth binds each of aps (one or two) with bind, all on one port: the
// first's when the port asked for is 0. Should that port be taken in the
// other family, it tries again with a fresh one, a few times.
func bindBoth[S io.Closer](aps []netip.AddrPort, bind func(netip.AddrPort) (S, uint16, error)) ([]bound[S], error) {
	var err error
	for range 8 {
		var out []bound[S]
		port := aps[0].Port()
		for _, ap := range aps {
			var s S
			var got uint16
			s, got, err = bind(netip.AddrPortFrom(ap.Addr(), port))
			if err != nil {
				break
			}
			port = got
			out = append(out, bound[S]{s, netip.AddrPortFrom(ap.Addr(), got)})
		}
		if err == nil {
			return out, nil
		}
		for _, b := range out {
			b.s.Close()
		}
		if aps[0].Port() != 0 || len(out) == 0 {
			break
		}
	}
	return nil, err
}

// bound is a socket and the address it is bound to.
type bound[S any] struct {
	s  S
	ap netip.AddrPort
}

// HTTPClient returns a client whose connections go through the tunnel,
// with host names resolved inside it. Clients share one transport, whose
// idle connections Close ends; no proxy from the environment applies.
func (t *Tunnel) HTTPClient() *http.Client {
	return &http.Client{Transport: t.transport}
}

// ping is Ping, with the route and closed checks.
func (t *Tunnel) ping(ctx context.Context, dst netip.Addr) (time.Duration, error) {
	dst = dst.Unmap()
	network := "ip4:icmp"
	if dst.Is6() {
		network = "ip6:ipv6-icmp"
	}
	addr := &net.IPAddr{IP: dst.AsSlice()}
	if err := t.stopped(); err != nil {
		return 0, &net.OpError{Op: "ping", Net: network, Addr: addr, Err: err}
	}
	if dst.IsValid() && !t.routes(dst) {
		return 0, &net.OpError{Op: "ping", Net: network, Addr: addr, Err: ErrNoRoute}
	}
	rtt, err := t.net.Ping(ctx, dst, uint16(t.pingSeq.Add(1)), make([]byte, 56))
	return rtt, t.opError("ping", network, addr, err)
}
