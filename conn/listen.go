package conn

import (
	"errors"
	"fmt"
	"net"
	"syscall"
)

// v6PortTries bounds how often listenPair picks a new port when the port
// the kernel gave the IPv4 socket is already taken for IPv6.
const v6PortTries = 8

// listenPair opens the wildcard IPv4 and IPv6 UDP sockets on one port. Go
// sets IPV6_V6ONLY on "udp6" sockets, so the two never see each other's
// traffic. With port 0 the IPv4 socket picks the port and the IPv6 socket
// follows it. A missing address family leaves that socket nil (IPv4 only
// when IPv6 is disabled, and the reverse); at least one is always open.
func listenPair(port uint16, logf func(string, ...any)) (v4, v6 *net.UDPConn, actual uint16, err error) {
	for try := 0; ; try++ {
		v4, err4 := net.ListenUDP("udp4", &net.UDPAddr{Port: int(port)})
		if err4 != nil {
			if !familyUnavailable(err4) {
				return nil, nil, 0, fmt.Errorf("conn: listen udp4 port %d: %w", port, err4)
			}
			v6, err6 := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6unspecified, Port: int(port)})
			if err6 != nil {
				return nil, nil, 0, fmt.Errorf("conn: listen port %d: udp4: %w; udp6: %w", port, err4, err6)
			}
			logf("conn: IPv4 unavailable (%v), IPv6 only", err4)
			return nil, v6, localPort(v6), nil
		}
		p := localPort(v4)
		v6, err6 := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6unspecified, Port: int(p)})
		switch {
		case err6 == nil:
			return v4, v6, p, nil
		case errors.Is(err6, syscall.EADDRINUSE):
			v4.Close()
			if port == 0 && try < v6PortTries-1 {
				continue
			}
			return nil, nil, 0, fmt.Errorf("conn: listen udp6 port %d: %w", p, err6)
		default:
			logf("conn: IPv6 unavailable (%v), IPv4 only", err6)
			return v4, nil, p, nil
		}
	}
}

// familyUnavailable reports errors that mean the address family is switched
// off on this host, as opposed to a port conflict or a permission problem.
func familyUnavailable(err error) bool {
	return errors.Is(err, syscall.EAFNOSUPPORT) ||
		errors.Is(err, syscall.EPROTONOSUPPORT) ||
		errors.Is(err, syscall.EADDRNOTAVAIL)
}

func localPort(c *net.UDPConn) uint16 {
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Port()
}
