package netstack

import (
	"net"
	"net/netip"
	"testing"
)

// An IPv6 listener is IPv6 only, as Go's "tcp6" and "udp6" are, so that
// the same port is free for IPv4 (and an IPv4 client does not show up on
// an IPv6 socket as ::ffff:a.b.c.d).
func TestListenIPv6Only(t *testing.T) {
	n, err := New(Options{Addresses: []netip.Addr{addrA4, addrA6}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for _, port := range []uint16{6010, 0} {
		ln4, err := n.ListenTCPAddrPort(netip.AddrPortFrom(netip.IPv4Unspecified(), port))
		if err != nil {
			t.Fatal(err)
		}
		p := uint16(ln4.Addr().(*net.TCPAddr).Port)
		if again, err := n.ListenTCPAddrPort(netip.AddrPortFrom(netip.IPv4Unspecified(), p)); err == nil {
			again.Close()
			t.Errorf("a second listener on 0.0.0.0:%d", p)
		}
		ln6, err := n.ListenTCPAddrPort(netip.AddrPortFrom(netip.IPv6Unspecified(), p))
		if err != nil {
			t.Errorf("tcp [::]:%d beside 0.0.0.0:%d: %v", p, p, err)
		} else {
			ln6.Close()
		}
		ln4.Close()
		pc4, err := n.ListenUDPAddrPort(netip.AddrPortFrom(netip.IPv4Unspecified(), port))
		if err != nil {
			t.Fatal(err)
		}
		p = uint16(pc4.LocalAddr().(*net.UDPAddr).Port)
		pc6, err := n.ListenUDPAddrPort(netip.AddrPortFrom(netip.IPv6Unspecified(), p))
		if err != nil {
			t.Errorf("udp [::]:%d beside 0.0.0.0:%d: %v", p, p, err)
		} else {
			pc6.Close()
		}
		pc4.Close()
	}
}
