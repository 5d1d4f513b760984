package rootless

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"

	"github.com/fips-go/fips-go/internal/app/proxy"
	"github.com/fips-go/fips-go/tun/netstack"
)

// udpFlow is one client of a UDP forward and its own socket towards the
// far side.
type udpFlow struct {
	c    net.Conn
	act  proxy.Activity
	stop chan struct{}
}

// udpFlows are a UDP forward's flows, one per client address, so that
// replies find their way back. Each counts against lim and ends when idle
// or when the forward closes.
type udpFlows struct {
	ctx   context.Context
	lim   *proxy.Limiter
	o     Options
	what  string // names the forward in log lines
	mu    sync.Mutex
	flows map[netip.AddrPort]*udpFlow
	wg    sync.WaitGroup
}

func newUDPFlows(ctx context.Context, lim *proxy.Limiter, o Options, what string) *udpFlows {
	return &udpFlows{ctx: ctx, lim: lim, o: o, what: what, flows: map[netip.AddrPort]*udpFlow{}}
}

// lookup returns from's flow, nil when there is none.
func (u *udpFlows) lookup(from netip.AddrPort) *udpFlow {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.flows[from]
}

// open returns from's flow, opening it with dial when there is none; nil
// (logged) when the limit is reached or dial fails. reply passes what the
// flow's socket receives back to from.
func (u *udpFlows) open(from netip.AddrPort, dial func() (net.Conn, error), reply func([]byte)) *udpFlow {
	u.mu.Lock()
	defer u.mu.Unlock()
	if f := u.flows[from]; f != nil {
		return f
	}
	if !u.lim.TryAcquire() {
		u.o.Logf("%s: dropping a datagram from %v: %d flows open (the limit)", u.what, from, u.lim.Cap())
		return nil
	}
	c, err := dial()
	if err != nil {
		u.lim.Release()
		u.o.Logf("%s: %v", u.what, err)
		return nil
	}
	f := &udpFlow{c: c, stop: make(chan struct{})}
	f.act.Touch()
	u.flows[from] = f
	u.wg.Go(func() {
		go proxy.CloseWhenIdle(u.ctx, &f.act, u.o.IdleTimeout, f.stop, func() { c.Close() })
		flowReplies(f, reply)
		close(f.stop)
		c.Close()
		u.mu.Lock()
		delete(u.flows, from)
		u.mu.Unlock()
		u.lim.Release()
	})
	return f
}

// close ends every flow and waits for them.
func (u *udpFlows) close() {
	u.mu.Lock()
	for _, f := range u.flows {
		f.c.Close()
	}
	u.mu.Unlock()
	u.wg.Wait()
}

// flowReplies passes what f's socket receives to reply until it closes.
func flowReplies(f *udpFlow, reply func([]byte)) {
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
		reply(buf[:n])
	}
}

// serveUDPForward relays datagrams between local clients of pc and remote
// inside the tunnel: each client address gets its own tunnel socket.
func serveUDPForward(ctx context.Context, pc *net.UDPConn, ns *netstack.Net, remote netip.AddrPort, lim *proxy.Limiter, o Options) {
	u := newUDPFlows(ctx, lim, o, fmt.Sprintf("udp forward to %v", remote))
	defer u.close()
	dial := func() (net.Conn, error) { return ns.DialUDPAddrPort(netip.AddrPort{}, remote) }
	buf := make([]byte, 65535)
	for {
		n, from, err := pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		f := u.lookup(from)
		if f == nil {
			if f = u.open(from, dial, func(b []byte) { pc.WriteToUDPAddrPort(b, from) }); f == nil {
				continue
			}
		}
		f.act.Touch()
		f.c.Write(buf[:n])
	}
}

// serveUDPReverse relays datagrams between tunnel clients of pc and local
// here: each client address gets its own local socket, connected to
// local.
func serveUDPReverse(ctx context.Context, pc net.PacketConn, local string, lim *proxy.Limiter, o Options) {
	u := newUDPFlows(ctx, lim, o, "reverse udp forward to "+local)
	defer u.close()
	dial := func() (net.Conn, error) { return net.Dial("udp", local) }
	buf := make([]byte, 65535)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		ua, ok := from.(*net.UDPAddr)
		if !ok {
			continue // the netstack's UDP sockets give *net.UDPAddr
		}
		key := ua.AddrPort()
		f := u.lookup(key)
		if f == nil {
			if f = u.open(key, dial, func(b []byte) { pc.WriteTo(b, from) }); f == nil {
				continue
			}
		}
		f.act.Touch()
		f.c.Write(buf[:n])
	}
}
