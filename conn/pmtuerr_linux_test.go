package conn

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestSendAfterProbeICMP: an ICMP fragmentation-needed that reaches a
// connected socket while a probe has DF set on it leaves the socket a
// pending EMSGSIZE, which the next send of any size returns. That is not
// the kernel refusing the batch's segment size: a GSO batch of small
// segments must still go out as one message afterwards, and no segment
// limit may be recorded (a limit at the tunnel's datagram size sends
// every datagram on its own, a quarter of the throughput).
func TestSendAfterProbeICMP(t *testing.T) {
	var a, b *end
	var cs *connSocket
	var raw int
	inNetns(t, 1500, func() error {
		ends := make([]*end, 2)
		for i := range ends {
			bd := NewLinux(Options{})
			fns, port, err := bd.Open(0)
			if err != nil {
				return err
			}
			ends[i] = &end{b: bd, fns: fns, port: port}
		}
		a, b = ends[0], ends[1]
		pc, err := a.b.Connect(Endpoint{Dst: b.at(lo4)})
		if err != nil {
			return err
		}
		cs = pc.(*connSocket)
		raw, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		return err
	})
	t.Cleanup(func() { a.b.Close(); b.b.Close(); unix.Close(raw) })
	if !a.sock(false).gso.Load() {
		t.Skip("kernel without UDP_SEGMENT")
	}
	// What a probe's window looks like when the router's answer comes
	// before the socket is set back to letting the kernel fragment.
	setDisc := func(v int) {
		t.Helper()
		if err := sockoptControl(cs.sock.conn, func(fd int) error {
			return unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, v)
		}); err != nil {
			t.Fatal(err)
		}
	}
	setDisc(unix.IP_PMTUDISC_PROBE)
	local := cs.sock.conn.LocalAddr().(*net.UDPAddr)
	icmp := fragNeeded(uint16(local.Port), b.port, 1280)
	if err := unix.Sendto(raw, icmp, 0, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("injecting the ICMP: %v", err)
	}
	setDisc(unix.IP_PMTUDISC_DONT)

	bufs, _, _ := rxBufs(64, groBufferSize)
	before := a.b.Stats()
	want := burst(20, 1000)
	if err := cs.Send(want); err != nil {
		t.Fatalf("20 x 1000 bytes after the ICMP: %v", err)
	}
	got, eps := recvN(t, b, b.fns[0], len(want), bufs)
	checkBurst(t, got, eps, want, a.at(lo4), lo4)
	after := a.b.Stats()
	if d := after.GSOOversize - before.GSOOversize; d != 0 {
		t.Errorf("%d oversize fallbacks for 1000-byte segments on a 1280-byte path", d)
	}
	if l := cs.sock.segLimit.Load(); l != 0 {
		t.Errorf("segment limit %d recorded from a pending socket error", l)
	}
	before = after
	if err := cs.Send(burst(20, 1000)); err != nil {
		t.Fatal(err)
	}
	recvN(t, b, b.fns[0], 20, bufs)
	if m := a.b.Stats().TxMessages - before.TxMessages; m != 1 {
		t.Errorf("20 x 1000 bytes took %d messages, want 1 (GSO)", m)
	}
}

// fragNeeded is an ICMP fragmentation-needed (type 3, code 4) with next-hop
// MTU mtu, quoting a UDP datagram 127.0.0.1:sport -> 127.0.0.1:dport.
func fragNeeded(sport, dport uint16, mtu int) []byte {
	m := make([]byte, 8+20+8)
	m[0], m[1] = 3, 4
	binary.BigEndian.PutUint16(m[6:], uint16(mtu))
	q := m[8:]
	q[0] = 0x45
	binary.BigEndian.PutUint16(q[2:], 1400)
	q[6] = 0x40 // DF
	q[8], q[9] = 64, unix.IPPROTO_UDP
	copy(q[12:], []byte{127, 0, 0, 1, 127, 0, 0, 1})
	binary.BigEndian.PutUint16(q[10:], inetSum(q[:20]))
	binary.BigEndian.PutUint16(q[20:], sport)
	binary.BigEndian.PutUint16(q[22:], dport)
	binary.BigEndian.PutUint16(q[24:], 1380)
	binary.BigEndian.PutUint16(m[2:], inetSum(m))
	return m
}

func inetSum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

// TestPathMTUAfterRouteChange: a connected IPv6 socket still knows its
// path MTU after the routing table changed under it. Any IPv6 route
// change (an address added, a tunnel brought up, a packet-too-big's route
// exception) makes the socket's cached route stale; its next send drops
// it, and since the sends carry IPV6_PKTINFO the kernel caches no new one,
// so IPV6_MTU answered ENOTCONN from then on and a path MTU learned from
// the local link or from ICMP never reached the device.
func TestPathMTUAfterRouteChange(t *testing.T) {
	const mtu = 1400
	var a, b *end
	var pc PathMTUConn
	inNetns(t, mtu, func() error {
		ends := make([]*end, 2)
		for i := range ends {
			bd := NewLinux(Options{})
			fns, port, err := bd.Open(0)
			if err != nil {
				return err
			}
			ends[i] = &end{b: bd, fns: fns, port: port}
		}
		a, b = ends[0], ends[1]
		if a.sock(true) == nil || len(b.fns) < 2 {
			return nil
		}
		c, err := a.b.Connect(Endpoint{Dst: b.at(lo6), Src: lo6})
		if err != nil {
			return err
		}
		pc = c.(PathMTUConn)
		if err := c.Send(burst(1, 100)); err != nil {
			return err
		}
		if err := addAddr6(netip.MustParseAddr("fd00:5::1"), 1); err != nil {
			return err
		}
		return c.Send(burst(1, 100))
	})
	t.Cleanup(func() { a.b.Close(); b.b.Close() })
	if pc == nil {
		t.Skip("no IPv6")
	}
	if got, err := pc.PathMTU(); err != nil || got != mtu {
		t.Fatalf("PathMTU after a route change: %d, %v; want %d", got, err, mtu)
	}
}

// addAddr6 adds addr/128 to the interface ifIndex with SIOCSIFADDR, from
// the calling thread's namespace.
func addAddr6(addr netip.Addr, ifIndex int) error {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var req struct { // struct in6_ifreq
		addr      [16]byte
		prefixLen uint32
		ifIndex   int32
	}
	req.addr, req.prefixLen, req.ifIndex = addr.As16(), 128, int32(ifIndex)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCSIFADDR, uintptr(unsafe.Pointer(&req))); e != 0 {
		return fmt.Errorf("SIOCSIFADDR %v: %w", addr, e)
	}
	return nil
}
