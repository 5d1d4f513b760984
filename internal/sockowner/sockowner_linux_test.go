package sockowner

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
)

func addrPort(a net.Addr) netip.AddrPort {
	ap := netip.MustParseAddrPort(a.String())
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// TestOwnerOfOwnSockets: both ways of asking find this process's sockets
// and its uid.
func TestOwnerOfOwnSockets(t *testing.T) {
	me := uint32(os.Geteuid())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	u6, err := net.ListenUDP("udp", &net.UDPAddr{}) // dual-stack, unspecified
	if err != nil {
		t.Fatal(err)
	}
	defer u6.Close()
	relay := netip.MustParseAddrPort("127.0.0.1:9")
	wild := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), addrPort(u6.LocalAddr()).Port())
	for _, tc := range []struct {
		name       string
		p          Proto
		self, peer netip.AddrPort
	}{
		{"tcp", TCP, addrPort(c.LocalAddr()), addrPort(c.RemoteAddr())},
		{"udp", UDP, addrPort(u.LocalAddr()), relay},
		{"udp on the unspecified address", UDP, wild, relay},
	} {
		for _, how := range []struct {
			name string
			f    func(Proto, netip.AddrPort, netip.AddrPort) (uint32, error)
		}{{"diag", diagOwner}, {"proc", procOwner}, {"Owner", Owner}} {
			uid, err := how.f(tc.p, tc.self, tc.peer)
			if err != nil || uid != me {
				t.Errorf("%s by %s: %d, %v; want %d", tc.name, how.name, uid, err, me)
			}
		}
	}
	// The TCP lookup is exact: the listener's side of the pair is not
	// the client's, and the reverse direction is the server's socket.
	if _, err := Owner(TCP, addrPort(c.LocalAddr()), netip.MustParseAddrPort("127.0.0.1:1")); !errors.Is(err, ErrNotFound) {
		t.Errorf("a connection that does not exist: %v", err)
	}
	if _, err := Owner(UDP, netip.MustParseAddrPort("127.0.0.1:1"), relay); !errors.Is(err, ErrNotFound) {
		t.Errorf("a UDP port nobody holds: %v", err)
	}
}

// TestOwnerIPv6: the same over ::1, where the kernel is asked in the
// IPv6 family.
func TestOwnerIPv6(t *testing.T) {
	me := uint32(os.Geteuid())
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp6", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	u, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	for _, how := range []struct {
		name string
		f    func(Proto, netip.AddrPort, netip.AddrPort) (uint32, error)
	}{{"diag", diagOwner}, {"proc", procOwner}} {
		if uid, err := how.f(TCP, addrPort(c.LocalAddr()), addrPort(c.RemoteAddr())); err != nil || uid != me {
			t.Errorf("tcp6 by %s: %d, %v", how.name, uid, err)
		}
		if uid, err := how.f(UDP, addrPort(u.LocalAddr()), netip.MustParseAddrPort("[::1]:9")); err != nil || uid != me {
			t.Errorf("udp6 by %s: %d, %v", how.name, uid, err)
		}
	}
}
