package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPathTooNarrowUDP: a UDP application inside the tunnel that sends
// datagrams too big for the path, with fragmentation forbidden (as a
// path-MTU-aware application does), hears of it from fips-go as it would
// from a router: a later send fails with EMSGSIZE and the kernel's route
// MTU for the destination drops to what the path carries. The underlay
// drops the ICMP, so only fips-go's answer inside the tunnel can say so.
// Both ends, inner IPv4 and IPv6, IPv4 and IPv6 underlay.
func TestPathTooNarrowUDP(t *testing.T) {
	requireRoot(t)
	for _, v6 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v6=%v/dropICMP", v6), func(t *testing.T) {
			p := pmtuLab(t, v6, true, 1280)
			p.a.ns.waitPing(p.b.tun4, 20*time.Second)
			// What fits inside the tunnel over a 1280-byte path; an inner
			// IPv6 sender is never told less than 1280.
			inner4 := 1280 - 60
			if v6 {
				inner4 = 1280 - 80
			}
			for i, c := range []struct {
				name     string
				src, dst *node
				to       netip.Addr
				limit    int
			}{
				{"A->B inner IPv4", p.a, p.b, p.b.tun4, inner4},
				{"A->B inner IPv6", p.a, p.b, p.b.tun6, 1280},
				{"B->A inner IPv4", p.b, p.a, p.a.tun4, inner4},
				{"B->A inner IPv6", p.b, p.a, p.a.tun6, 1280},
			} {
				addr := svc(c.to, 5100+i)
				// Something listens, so no port-unreachable muddles the
				// socket's error; nothing is asserted about what arrives.
				startHelper(t, c.dst.ns, helperSpec{Mode: "udp-sink", Addr: addr.String(),
					Size: 1300, Count: 1000, Timeout: time.Minute})
				h := startHelper(t, c.src.ns, helperSpec{Mode: "udp-pmtu", Addr: addr.String(),
					Size: 1300, Timeout: 30 * time.Second})
				res := h.wait(time.Minute)
				if res.MTU <= 0 || res.MTU > c.limit {
					t.Errorf("%s: route MTU %d after EMSGSIZE, want at most %d", c.name, res.MTU, c.limit)
				}
				t.Logf("%s: EMSGSIZE after %d datagrams of 1300 bytes (%.1f s), route MTU %d",
					c.name, res.Datagrams, res.Seconds, res.MTU)
			}
			t.Logf("A: %s", p.a.fipsctl("show", p.a.iface))
		})
	}
}

// udpPMTU is the helper's udp-pmtu mode: a connected UDP socket to s.Addr
// that forbids fragmentation sends an s.Size datagram every 100 ms until a
// send fails with EMSGSIZE, then reports the socket's route MTU (IP_MTU or
// IPV6_MTU) in MTU and how many datagrams it sent in Datagrams. Any other
// send error, or none within s.Timeout, fails it.
func udpPMTU(s helperSpec) (helperResult, error) {
	var res helperResult
	c, err := net.Dial("udp", s.Addr)
	if err != nil {
		return res, err
	}
	defer c.Close()
	v6 := c.RemoteAddr().(*net.UDPAddr).IP.To4() == nil
	rc, err := c.(*net.UDPConn).SyscallConn()
	if err != nil {
		return res, err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		if v6 {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO)
			if serr == nil {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_DONTFRAG, 1)
			}
			return
		}
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
	})
	if err = errors.Join(err, serr); err != nil {
		return res, err
	}
	buf := make([]byte, s.Size)
	deadline := time.Now().Add(s.Timeout)
	for time.Now().Before(deadline) {
		fillDatagram(buf, s.Seed, uint64(res.Datagrams))
		_, err := c.Write(buf)
		if errors.Is(err, syscall.EMSGSIZE) {
			err = rc.Control(func(fd uintptr) {
				if v6 {
					res.MTU, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_MTU)
				} else {
					res.MTU, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU)
				}
			})
			return res, errors.Join(err, serr)
		}
		if err != nil {
			return res, fmt.Errorf("datagram %d: %w", res.Datagrams, err)
		}
		res.Datagrams++
		time.Sleep(100 * time.Millisecond)
	}
	return res, fmt.Errorf("no EMSGSIZE after %d datagrams of %d bytes", res.Datagrams, s.Size)
}
