package exit

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/fips-go/fips-go/internal/app/proxy"
	"github.com/fips-go/fips-go/tun/netstack"
	"golang.org/x/net/icmp"
)

// Echo requests leave through unprivileged ICMP sockets (SOCK_DGRAM,
// IPPROTO_ICMP), which Linux allows to the groups in
// net.ipv4.ping_group_range. One socket per peer address, destination and
// echo identifier: the kernel gives each socket an identifier of its own
// and hands it only the replies to it, which go back to the peer with the
// peer's identifier. A mapping counts as a flow and ends after
// UDPIdleTimeout without requests or replies.

type pingKey struct {
	src, dst netip.Addr
	id       uint16
}

type pingFlow struct {
	c   *icmp.PacketConn
	dst net.Addr
	act proxy.Activity
}

// pingState is the exit's table of echo mappings.
type pingState struct {
	err   error // why ping sockets are unavailable, nil if they work
	mu    sync.Mutex
	flows map[pingKey]*pingFlow // guarded by mu; bounded by the flow caps
}

// probePing opens and closes a ping socket to learn whether this host
// lets us have them.
func probePing() error {
	c, err := icmp.ListenPacket("udp4", "0.0.0.0")
	if err != nil {
		return err
	}
	c.Close()
	return nil
}

// handlePing relays one echo request. It runs on the packet's delivery
// path: it opens at most one socket and sends one datagram.
func (e *Exit) handlePing(q netstack.PingRequest) bool {
	src, dst := netip.AddrPortFrom(q.Src, 0), netip.AddrPortFrom(q.Dst, 0)
	if e.ping.err != nil {
		e.refuse(ReasonPingUnavailable, "icmp", src, dst)
		return true
	}
	key := pingKey{q.Src, q.Dst, q.ID}
	e.ping.mu.Lock()
	f := e.ping.flows[key]
	e.ping.mu.Unlock()
	if f == nil {
		if f = e.openPing(key); f == nil {
			return true
		}
	}
	f.act.Touch()
	msg := make([]byte, 8+len(q.Payload))
	msg[0] = 8 // echo request
	if q.Dst.Is6() {
		msg[0] = 128
	}
	binary.BigEndian.PutUint16(msg[4:], q.ID) // the kernel puts the socket's own
	binary.BigEndian.PutUint16(msg[6:], q.Seq)
	copy(msg[8:], q.Payload)
	if n, err := f.c.WriteTo(msg, f.dst); err == nil {
		e.ctr.toHost.Add(uint64(n))
	}
	return true
}

// openPing admits a new mapping and starts its reader, or counts why not.
func (e *Exit) openPing(key pingKey) *pingFlow {
	src, dst := netip.AddrPortFrom(key.src, 0), netip.AddrPortFrom(key.dst, 0)
	peer, ok := e.o.PeerOf(key.src)
	if !ok {
		e.refuse(ReasonUnknownPeer, "icmp", src, dst)
		return nil
	}
	if r := e.o.Policy.CheckPing(key.dst, e.host.get(time.Now())); r != reasonOK {
		e.refuse(r, "icmp", src, dst)
		return nil
	}
	if r := e.caps.acquire(peer); r != reasonOK {
		e.refuse(r, "icmp", src, dst)
		return nil
	}
	network, laddr := "udp4", "0.0.0.0"
	if key.dst.Is6() {
		network, laddr = "udp6", "::"
	}
	c, err := icmp.ListenPacket(network, laddr)
	if err != nil {
		e.caps.release(peer)
		e.refuse(ReasonPingUnavailable, "icmp", src, dst)
		return nil
	}
	f := &pingFlow{c: c, dst: &net.UDPAddr{IP: key.dst.AsSlice()}}
	f.act.Touch()
	// Another request for the same mapping, delivered at the same time,
	// may have opened it first: use that one.
	e.ping.mu.Lock()
	if old := e.ping.flows[key]; old != nil {
		e.ping.mu.Unlock()
		e.caps.release(peer)
		c.Close()
		return old
	}
	e.ping.flows[key] = f
	e.ping.mu.Unlock()
	fl := &flow{abort: func() { c.Close() }}
	if !e.track(fl, protoICMP) {
		e.dropPing(key)
		e.caps.release(peer)
		c.Close()
		return nil
	}
	go func() {
		defer e.untrack(fl, protoICMP, peer)
		stop := make(chan struct{})
		go proxy.CloseWhenIdle(e.ctx, &f.act, e.o.UDPIdleTimeout, stop, func() { c.Close() })
		e.pingReplies(key, f)
		close(stop)
		c.Close()
		e.dropPing(key)
	}()
	return f
}

// dropPing removes key's mapping.
func (e *Exit) dropPing(key pingKey) {
	e.ping.mu.Lock()
	delete(e.ping.flows, key)
	e.ping.mu.Unlock()
}

// pingReplies passes the echo replies of f's socket back to the peer.
func (e *Exit) pingReplies(key pingKey, f *pingFlow) {
	reply := byte(0)
	if key.dst.Is6() {
		reply = 129
	}
	buf := make([]byte, udpBufSize)
	for {
		n, _, err := f.c.ReadFrom(buf)
		if err != nil {
			return
		}
		b := buf[:n]
		if len(b) < 8 || b[0] != reply {
			continue
		}
		f.act.Touch()
		seq := binary.BigEndian.Uint16(b[6:])
		if e.ns.SendEchoReply(key.dst, key.src, key.id, seq, b[8:]) == nil {
			e.ctr.toPeer.Add(uint64(n))
		}
	}
}
