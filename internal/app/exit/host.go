package exit

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// hostEvery is how long a reading of the host's state serves new flows:
// addresses change, and reading them costs a netlink dump.
const hostEvery = time.Second

// InterfacePrefixes are this host's interface addresses with their
// prefix lengths, every interface's (nil when they cannot be read).
func InterfacePrefixes() []netip.Prefix {
	ifas, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Prefix
	for _, ifa := range ifas {
		if n, ok := ifa.(*net.IPNet); ok {
			a, ok := netip.AddrFromSlice(n.IP)
			ones, _ := n.Mask.Size()
			if ok {
				out = append(out, netip.PrefixFrom(a.Unmap(), min(ones, a.Unmap().BitLen())))
			}
		}
	}
	return out
}

// hostView reads the host's state through read at most once per every;
// callers share the reading, which nobody changes.
type hostView struct {
	read  func() HostState
	every time.Duration
	mu    sync.Mutex
	at    time.Time  // guarded by mu: when cur was read
	cur   *HostState // guarded by mu
}

func (v *hostView) get(now time.Time) *HostState {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.cur == nil || now.Sub(v.at) >= v.every || now.Before(v.at) {
		st := v.read()
		v.cur, v.at = &st, now
	}
	return v.cur
}

// udpDialer opens the exit's host UDP sockets with SO_BROADCAST off: Go
// sets it on every UDP socket, and with it the kernel would send to a
// subnet's broadcast address the policy did not know of.
var udpDialer = net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) { serr = noBroadcast(fd) }); err != nil {
		return err
	}
	return serr
}}

// dialHostUDP opens the host socket of a UDP flow, connected to target.
func dialHostUDP(ctx context.Context, target netip.AddrPort) (*net.UDPConn, error) {
	c, err := udpDialer.DialContext(ctx, "udp", target.String())
	if err != nil {
		return nil, err
	}
	return c.(*net.UDPConn), nil
}
