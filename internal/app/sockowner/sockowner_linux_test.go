package sockowner

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
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

// udpReuseAs opens a UDP socket with SO_REUSEADDR bound to 127.0.0.1:port
// (0: any) whose owner is uid: the socket is made while this thread's
// fsuid is uid, which is what the kernel records as its owner.
func udpReuseAs(t *testing.T, uid, port int) (fd int, bound int) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev, err := unix.SetfsuidRetUid(uid)
	if err != nil {
		t.Fatal(err)
	}
	fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	unix.Setfsuid(prev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fd, sa.(*unix.SockaddrInet4).Port
}

// TestOwnerSharedUDPPort: sockets of two users share one UDP address
// (both set SO_REUSEADDR). Whichever was bound first, no lookup may name
// either user: the kernel may hand a datagram from that address to
// either socket, so neither owns it.
func TestOwnerSharedUDPPort(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a socket owned by a second user (uid 65534)")
	}
	relay := netip.MustParseAddrPort("127.0.0.1:9")
	for _, order := range [][2]int{{65534, os.Geteuid()}, {os.Geteuid(), 65534}} {
		_, port := udpReuseAs(t, order[0], 0)
		udpReuseAs(t, order[1], port)
		self := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
		for _, how := range []struct {
			name string
			f    func(Proto, netip.AddrPort, netip.AddrPort) (uint32, error)
		}{{"diag", diagOwner}, {"proc", procOwner}, {"Owner", Owner}} {
			if uid, err := how.f(UDP, self, relay); !errors.Is(err, ErrNotFound) {
				t.Errorf("uid %d bound first, by %s: %d, %v; want ErrNotFound", order[0], how.name, uid, err)
			}
		}
	}
}
