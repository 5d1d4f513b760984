package conn

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOuterDatagramsMayFragment: both binds clear DF on their sockets, so
// a tunnel MTU above the path MTU works as with kernel WireGuard. Linux's
// default (IP_PMTUDISC_WANT) sets DF on every datagram that fits the first
// hop, and a smaller MTU further on then drops it.
func TestOuterDatagramsMayFragment(t *testing.T) {
	lb := openEnd(t, Options{})
	sb := NewStd(Options{})
	if _, _, err := sb.Open(0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	st := sb.state.Load()
	conns := map[string][2]*net.UDPConn{"linux": {lb.sock(false).conn, nil}, "std": {st.v4, st.v6}}
	if s6 := lb.sock(true); s6 != nil {
		conns["linux"] = [2]*net.UDPConn{lb.sock(false).conn, s6.conn}
	}
	for name, cs := range conns {
		for i, c := range cs {
			if c == nil {
				continue
			}
			checks := []struct{ level, opt, want int }{{unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DONT}}
			if i == 1 {
				checks = []struct{ level, opt, want int }{
					{unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DONT},
					{unix.IPPROTO_IPV6, unix.IPV6_DONTFRAG, 0},
				}
			}
			for _, ck := range checks {
				var got int
				if err := sockoptControl(c, func(fd int) (err error) {
					got, err = unix.GetsockoptInt(fd, ck.level, ck.opt)
					return err
				}); err != nil {
					t.Fatalf("%s socket %d: getsockopt %d/%d: %v", name, i, ck.level, ck.opt, err)
				}
				if got != ck.want {
					t.Errorf("%s socket %d: option %d/%d is %d, want %d", name, i, ck.level, ck.opt, got, ck.want)
				}
			}
		}
	}
}
