package exit

import (
	"net"
	"net/netip"
	"testing"
	"time"
)

// hostAddr4 is a non-loopback IPv4 address of this host, if it has one.
func hostAddr4(t *testing.T) netip.Addr {
	ifas, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("no interface addresses: %v", err)
	}
	for _, ifa := range ifas {
		p, err := netip.ParsePrefix(ifa.String())
		if err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() && !p.Addr().IsLinkLocalUnicast() {
			return p.Addr()
		}
	}
	t.Skip("this host has no non-loopback IPv4 address")
	return netip.Addr{}
}

// TestExitHostAddresses: a service bound to 0.0.0.0 on the host is not
// reachable at the host's own non-loopback address (the kernel would
// deliver it over lo), by TCP or UDP, though the allow list is
// 0.0.0.0/0; naming the address opens it.
func TestExitHostAddresses(t *testing.T) {
	own := hostAddr4(t)
	u, err := net.ListenUDP("udp4", &net.UDPAddr{})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	udpDst := netip.AddrPortFrom(own, uint16(u.LocalAddr().(*net.UDPAddr).Port))
	ln, err := net.Listen("tcp4", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	tcpDst := netip.AddrPortFrom(own, uint16(ln.Addr().(*net.TCPAddr).Port))

	client, e := setup(t, netip.AddrPort{})
	if c, err := client.DialTCPAddrPort(ctx(t), tcpDst); err == nil {
		c.Close()
		t.Errorf("TCP to the host's own %v connected", tcpDst)
	}
	if n := e.Refused(ReasonHostAddr); n != 1 {
		t.Errorf("TCP: refused as host_address %d times, want 1", n)
	}
	c, err := client.DialUDPAddrPort(netip.AddrPort{}, udpDst)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("hello"))
	for i := 0; e.Refused(ReasonHostAddr) < 2 && i < 10000; i++ {
		time.Sleep(time.Millisecond)
	}
	u.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, _, err := u.ReadFrom(make([]byte, 16)); err == nil {
		t.Errorf("UDP to the host's own %v arrived (%d bytes)", udpDst, n)
	}
	if n := e.Refused(ReasonHostAddr); n != 2 {
		t.Errorf("UDP: refused as host_address %d times in all, want 2", n)
	}

	// Named, it is reachable.
	client2, _ := setupWith(t, func(o *Options) {
		o.Policy = NewPolicy(PolicyOptions{Allow: []netip.Prefix{netip.PrefixFrom(own, 32)}})
	})
	c2, err := client2.DialTCPAddrPort(ctx(t), tcpDst)
	if err != nil {
		t.Fatalf("named %v: %v", own, err)
	}
	c2.Close()
}
