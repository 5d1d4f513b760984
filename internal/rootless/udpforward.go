package rootless

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"

	"github.com/fips-go/fips-go/internal/proxy"
	"github.com/fips-go/fips-go/tun/netstack"
)

// udpFlow is one local client of a UDP forward and its socket in the
// tunnel.
type udpFlow struct {
	c    net.Conn
	act  proxy.Activity
	stop chan struct{}
}

// serveUDPForward relays datagrams between local clients of pc and remote
// inside the tunnel: each client address gets its own tunnel socket, so
// replies find their way back. Flows count against lim and end when idle.
func serveUDPForward(ctx context.Context, pc *net.UDPConn, ns *netstack.Net, remote netip.AddrPort, lim *proxy.Limiter, o Options) {
	var mu sync.Mutex // guards flows
	flows := map[netip.AddrPort]*udpFlow{}
	var wg sync.WaitGroup
	defer func() {
		mu.Lock()
		for _, f := range flows {
			f.c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	buf := make([]byte, 65535)
	for {
		n, from, err := pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		mu.Lock()
		f := flows[from]
		if f == nil {
			if !lim.TryAcquire() {
				mu.Unlock()
				o.Logf("udp forward to %v: dropping a datagram from %v: %d flows open (the limit)", remote, from, lim.Cap())
				continue
			}
			c, err := ns.DialUDPAddrPort(netip.AddrPort{}, remote)
			if err != nil {
				lim.Release()
				mu.Unlock()
				o.Logf("udp forward to %v: %v", remote, err)
				continue
			}
			f = &udpFlow{c: c, stop: make(chan struct{})}
			f.act.Touch()
			flows[from] = f
			wg.Go(func() {
				go proxy.CloseWhenIdle(ctx, &f.act, o.IdleTimeout, f.stop, func() { c.Close() })
				udpFlowReplies(pc, f, from)
				close(f.stop)
				c.Close()
				mu.Lock()
				delete(flows, from)
				mu.Unlock()
				lim.Release()
			})
		}
		mu.Unlock()
		f.act.Touch()
		f.c.Write(buf[:n])
	}
}

// udpFlowReplies passes the tunnel's replies back to the client at from.
func udpFlowReplies(pc *net.UDPConn, f *udpFlow, from netip.AddrPort) {
	buf := make([]byte, 65535)
	for {
		n, err := f.c.Read(buf)
		if err != nil {
			return
		}
		f.act.Touch()
		pc.WriteToUDPAddrPort(buf[:n], from)
	}
}

// reverseUDPListeners opens port on each IP family the tunnel has.
func reverseUDPListeners(ns *netstack.Net, addrs []netip.Addr, port uint16) ([]net.PacketConn, error) {
	var out []net.PacketConn
	have4, have6 := families(addrs)
	for _, fam := range []struct {
		ok  bool
		any netip.Addr
	}{{have4, netip.IPv4Unspecified()}, {have6, netip.IPv6Unspecified()}} {
		if !fam.ok {
			continue
		}
		pc, err := ns.ListenUDPAddrPort(netip.AddrPortFrom(fam.any, port))
		if err != nil {
			for _, p := range out {
				p.Close()
			}
			return nil, fmt.Errorf("reverse udp forward of port %d: listen in the tunnel: %w", port, err)
		}
		out = append(out, pc)
	}
	return out, nil
}

// serveUDPReverse relays datagrams between tunnel clients of pc and local
// here: each client address gets its own local socket, connected to
// local, so replies find their way back. Flows count against lim and end
// when idle.
func serveUDPReverse(ctx context.Context, pc net.PacketConn, local string, lim *proxy.Limiter, o Options) {
	var mu sync.Mutex // guards flows
	flows := map[string]*udpFlow{}
	var wg sync.WaitGroup
	defer func() {
		mu.Lock()
		for _, f := range flows {
			f.c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	buf := make([]byte, 65535)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		key := from.String()
		mu.Lock()
		f := flows[key]
		if f == nil {
			if !lim.TryAcquire() {
				mu.Unlock()
				o.Logf("reverse udp forward to %s: dropping a datagram from %v: %d flows open (the limit)", local, from, lim.Cap())
				continue
			}
			c, err := net.Dial("udp", local)
			if err != nil {
				lim.Release()
				mu.Unlock()
				o.Logf("reverse udp forward to %s: %v", local, err)
				continue
			}
			f = &udpFlow{c: c, stop: make(chan struct{})}
			f.act.Touch()
			flows[key] = f
			wg.Go(func() {
				go proxy.CloseWhenIdle(ctx, &f.act, o.IdleTimeout, f.stop, func() { c.Close() })
				reverseReplies(pc, f, from)
				close(f.stop)
				c.Close()
				mu.Lock()
				delete(flows, key)
				mu.Unlock()
				lim.Release()
			})
		}
		mu.Unlock()
		f.act.Touch()
		f.c.Write(buf[:n])
	}
}

// reverseReplies passes the local server's replies back into the tunnel.
func reverseReplies(pc net.PacketConn, f *udpFlow, to net.Addr) {
	buf := make([]byte, 65535)
	for {
		n, err := f.c.Read(buf)
		if errors.Is(err, syscall.ECONNREFUSED) {
			continue // an ICMP error for an earlier datagram
		}
		if err != nil {
			return
		}
		f.act.Touch()
		pc.WriteTo(buf[:n], to)
	}
}
