package netstack

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
)

// fullAddr converts ap for gVisor; an unspecified or missing address means
// "any".
func fullAddr(ap netip.AddrPort) (tcpip.FullAddress, tcpip.NetworkProtocolNumber) {
	a := ap.Addr().Unmap()
	proto := ipv4.ProtocolNumber
	if a.Is6() {
		proto = ipv6.ProtocolNumber
	}
	fa := tcpip.FullAddress{NIC: nicID, Port: ap.Port()}
	if a.IsValid() && !a.IsUnspecified() {
		fa.Addr = tcpip.AddrFromSlice(a.AsSlice())
	}
	return fa, proto
}

// DialContext connects to address ("ip:port", "[ipv6]:port") over network
// "tcp", "tcp4", "tcp6", "udp", "udp4" or "udp6". Names are not resolved.
func (n *Net) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil, fmt.Errorf("netstack: dial %s %q: want a literal ip:port (no DNS): %w", network, address, err)
	}
	a := ap.Addr().Unmap()
	ap = netip.AddrPortFrom(a, ap.Port())
	var want4, want6 bool
	switch network {
	case "tcp", "udp":
		want4, want6 = true, true
	case "tcp4", "udp4":
		want4 = true
	case "tcp6", "udp6":
		want6 = true
	default:
		return nil, fmt.Errorf("netstack: dial: unknown network %q", network)
	}
	if (a.Is4() && !want4) || (a.Is6() && !want6) {
		return nil, fmt.Errorf("netstack: dial %s: address %v is of the other IP family", network, a)
	}
	if network[0] == 't' {
		return n.DialTCPAddrPort(ctx, ap)
	}
	return n.DialUDPAddrPort(netip.AddrPort{}, ap)
}

// DialTCPAddrPort opens a TCP connection to addr through the stack.
func (n *Net) DialTCPAddrPort(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	if n.isClosed() {
		return nil, errClosed
	}
	if !addr.IsValid() || addr.Addr().IsUnspecified() || addr.Port() == 0 {
		return nil, fmt.Errorf("netstack: dial tcp %v: invalid address", addr)
	}
	fa, proto := fullAddr(addr)
	c, err := gonet.DialContextTCP(ctx, n.stack, fa, proto)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// ListenTCPAddrPort listens for TCP connections on addr; an unspecified
// address listens on all of the family's addresses. An IPv6 listener is
// IPv6 only, so that the same port can be listened on for IPv4 too.
func (n *Net) ListenTCPAddrPort(addr netip.AddrPort) (net.Listener, error) {
	if n.isClosed() {
		return nil, errClosed
	}
	if !addr.Addr().IsValid() {
		return nil, fmt.Errorf("netstack: listen tcp %v: invalid address", addr)
	}
	fa, proto := fullAddr(addr)
	return n.listenTCP(fa, proto)
}

// ListenUDPAddrPort opens an unconnected UDP socket on addr; an IPv6 one
// is IPv6 only, as for ListenTCPAddrPort.
func (n *Net) ListenUDPAddrPort(addr netip.AddrPort) (net.PacketConn, error) {
	if n.isClosed() {
		return nil, errClosed
	}
	if !addr.Addr().IsValid() {
		return nil, fmt.Errorf("netstack: listen udp %v: invalid address", addr)
	}
	fa, proto := fullAddr(addr)
	return n.listenUDP(fa, proto)
}

// DialUDPAddrPort opens a UDP socket connected to raddr, bound to laddr
// unless laddr is the zero AddrPort.
func (n *Net) DialUDPAddrPort(laddr, raddr netip.AddrPort) (net.Conn, error) {
	if n.isClosed() {
		return nil, errClosed
	}
	if !raddr.IsValid() || raddr.Addr().IsUnspecified() || raddr.Port() == 0 {
		return nil, fmt.Errorf("netstack: dial udp %v: invalid address", raddr)
	}
	rfa, proto := fullAddr(raddr)
	var lfa *tcpip.FullAddress
	if laddr.IsValid() {
		fa, lproto := fullAddr(laddr)
		if lproto != proto {
			return nil, fmt.Errorf("netstack: dial udp %v from %v: mixed IP families", raddr, laddr)
		}
		lfa = &fa
	}
	c, err := gonet.DialUDP(n.stack, lfa, &rfa, proto)
	if err != nil {
		return nil, err
	}
	return c, nil
}
