package netstack

import (
	"errors"
	"net"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// listenBacklog is Linux's SOMAXCONN, which gonet uses too.
const listenBacklog = 4096

// newBound is an endpoint of transport bound to fa. An IPv6 endpoint is
// IPv6 only (IPV6_V6ONLY, as Go sets for "tcp6" and "udp6"): gVisor's
// default, dual-stack, would take the port from IPv4 listeners too, and
// show IPv4 clients as ::ffff:a.b.c.d.
func (n *Net) newBound(transport tcpip.TransportProtocolNumber, fa tcpip.FullAddress, proto tcpip.NetworkProtocolNumber, wq *waiter.Queue) (tcpip.Endpoint, error) {
	network := "udp"
	if transport == tcp.ProtocolNumber {
		network = "tcp"
	}
	ep, terr := n.stack.NewEndpoint(transport, proto, wq)
	if terr != nil {
		return nil, tcpipErr("listen "+network, terr)
	}
	if proto == ipv6.ProtocolNumber {
		ep.SocketOptions().SetV6Only(true)
	}
	if transport == tcp.ProtocolNumber {
		// As Go sets SO_REUSEADDR on listeners: connections in
		// TIME-WAIT do not keep a closed listener's port.
		ep.SocketOptions().SetReuseAddress(true)
	}
	if terr := ep.Bind(fa); terr != nil {
		ep.Close()
		return nil, &net.OpError{Op: "bind", Net: network, Addr: fullNetAddr(network, fa), Err: errors.New(terr.String())}
	}
	return ep, nil
}

// listenTCP is gonet.ListenTCP with newBound's endpoint.
func (n *Net) listenTCP(fa tcpip.FullAddress, proto tcpip.NetworkProtocolNumber) (net.Listener, error) {
	var wq waiter.Queue
	ep, err := n.newBound(tcp.ProtocolNumber, fa, proto, &wq)
	if err != nil {
		return nil, err
	}
	if terr := ep.Listen(listenBacklog); terr != nil {
		ep.Close()
		return nil, &net.OpError{Op: "listen", Net: "tcp", Addr: fullNetAddr("tcp", fa), Err: errors.New(terr.String())}
	}
	return gonet.NewTCPListener(n.stack, &wq, ep), nil
}

// listenUDP is an unconnected gonet UDP socket on newBound's endpoint.
func (n *Net) listenUDP(fa tcpip.FullAddress, proto tcpip.NetworkProtocolNumber) (net.PacketConn, error) {
	var wq waiter.Queue
	ep, err := n.newBound(udp.ProtocolNumber, fa, proto, &wq)
	if err != nil {
		return nil, err
	}
	return gonet.NewUDPConn(&wq, ep), nil
}

// fullNetAddr is fa as a net.Addr of network, for errors.
func fullNetAddr(network string, fa tcpip.FullAddress) net.Addr {
	var ip net.IP
	if fa.Addr.Len() > 0 {
		ip = net.IP(fa.Addr.AsSlice())
	}
	if network == "tcp" {
		return &net.TCPAddr{IP: ip, Port: int(fa.Port)}
	}
	return &net.UDPAddr{IP: ip, Port: int(fa.Port)}
}
