// Package exit relays a WireGuard peer's TCP and UDP to the host's
// network without privileges: a userspace TCP/IP stack terminates each
// flow and re-originates it from an ordinary host socket, as a slirp does.
package exit

import (
	"cmp"
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fips-go/fips-go/internal/app/proxy"
	"github.com/fips-go/fips-go/tun/netstack"
)

// Defaults for zero Options fields.
const (
	DefaultMaxFlows        = 1024
	DefaultMaxFlowsPerPeer = 256
	DefaultTCPIdleTimeout  = 2 * time.Hour
	DefaultUDPIdleTimeout  = 60 * time.Second
	DefaultConnectTimeout  = 10 * time.Second
	// DefaultMaxPendingPerPeer is Options.MaxPendingPerPeer's default:
	// an eighth of the SYNs the stack holds at once (256), so that one
	// peer's SYNs to a silent host leave room for the others'.
	DefaultMaxPendingPerPeer = netstack.DefaultMaxPendingTCP / 8
	// ACKHold is the exit netstack's Options.ACKHold: measured against 4
	// ms and none with 100 flows (see docs/benchmarks.md).
	ACKHold = 2 * time.Millisecond
	// TimerSlack is the exit netstack's Options.TimerSlack, Linux's 2 ms:
	// with 100 flows, 5 ms moved about 4% more than 2 ms (within the
	// noise) but added 1.2 ms to a TCP round trip under that load; see
	// docs/benchmarks.md.
	TimerSlack = 2 * time.Millisecond
)

// udpBufSize holds the largest datagram, per direction of a UDP flow.
const udpBufSize = 64 << 10

// Options configure an Exit. Policy and PeerOf are required.
type Options struct {
	Policy *Policy
	// PeerOf names the peer whose AllowedIPs hold a source address.
	PeerOf func(netip.Addr) (peer string, ok bool)
	// MaxFlows caps the TCP and UDP flows open at once, MaxFlowsPerPeer
	// those of one peer.
	MaxFlows, MaxFlowsPerPeer int
	// TCPIdleTimeout and UDPIdleTimeout end flows that moved nothing for
	// that long.
	TCPIdleTimeout, UDPIdleTimeout time.Duration
	// BufferBudget is what the TCP flows' netstack buffers may hold
	// together, per direction (default DefaultBufferBudget); see
	// bufferShare. SendBufferMax and ReceiveBufferMax are one flow's
	// most (the netstack's TCPSendBuffer and TCPReceiveBufferMax; default
	// the netstack's defaults).
	BufferBudget, SendBufferMax, ReceiveBufferMax int
	// ConnectTimeout bounds a host-side TCP connect; the peer's SYN is
	// answered with a RST when it passes. HandshakeTimeout bounds the
	// peer's side of the handshake after it (default
	// netstack.DefaultHandshakeTimeout).
	ConnectTimeout, HandshakeTimeout time.Duration
	// MaxPendingPerPeer caps one peer's SYNs waiting for the host's
	// connect and the peer's handshake; past it a SYN is dropped (the
	// peer resends it) and counted as ReasonPeerPending.
	MaxPendingPerPeer int
	// DNS are the host's resolvers: DNS to one of Tunnel (the exit's own
	// tunnel addresses) on port 53 is relayed to DNS[0]. None: refused.
	DNS    []netip.AddrPort
	Tunnel []netip.Addr
	// Host reads the host's addresses and the exit's listening ports as
	// they are now, for the policy; it is called at most once a second.
	// nil: InterfacePrefixes and no ports.
	Host func() HostState
	// Logf receives refusals (at most one line a second per reason);
	// Notef what the user should see at start (ping unavailable).
	Logf, Notef func(format string, args ...any)
}

// Exit is a running relay on one stack.
type Exit struct {
	o      Options
	caps   *flowCaps
	syns   *flowCaps // SYNs being answered, by peer
	logs   logLimit
	ctx    context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
	dial   net.Dialer
	self   map[netip.Addr]bool
	host   hostView
	mu     sync.Mutex
	flows  map[*flow]struct{} // guarded by mu; at most MaxFlows
	tcpN   int                // guarded by mu: TCP flows in flows
	shares [2]int             // guarded by mu: the send and receive sizes the TCP flows have
	ctr    counters
	ns     *netstack.Net
	ping   pingState
}

// flow is one relayed TCP connection, UDP flow or ping mapping; abort
// ends it, resize (TCP only) sets its netstack buffers.
type flow struct {
	abort  func()
	resize func(send, receive int)
}

type counters struct {
	open, opened  [3]atomic.Int64 // by protocol: tcp, udp, icmp
	toHost        atomic.Uint64
	toPeer        atomic.Uint64
	unreachToPeer atomic.Uint64 // ICMP port unreachables relayed to peers
	synsPending   atomic.Int64  // SYNs waiting for the host's connect or the peer's handshake
	handshakeFail atomic.Uint64 // host connected, the peer's handshake did not complete
	bufInUse      atomic.Int64
	refused       [numReasons]atomic.Uint64
}

const (
	protoTCP  = 0
	protoUDP  = 1
	protoICMP = 2
)

// Start relays the flows ns's peers send to other addresses.
func Start(ns *netstack.Net, o Options) (*Exit, error) {
	o.MaxFlows = cmp.Or(o.MaxFlows, DefaultMaxFlows)
	o.MaxFlowsPerPeer = cmp.Or(o.MaxFlowsPerPeer, DefaultMaxFlowsPerPeer)
	o.TCPIdleTimeout = cmp.Or(o.TCPIdleTimeout, DefaultTCPIdleTimeout)
	o.UDPIdleTimeout = cmp.Or(o.UDPIdleTimeout, DefaultUDPIdleTimeout)
	o.ConnectTimeout = cmp.Or(o.ConnectTimeout, DefaultConnectTimeout)
	o.HandshakeTimeout = cmp.Or(o.HandshakeTimeout, netstack.DefaultHandshakeTimeout)
	o.MaxPendingPerPeer = cmp.Or(o.MaxPendingPerPeer, DefaultMaxPendingPerPeer)
	o.BufferBudget = cmp.Or(o.BufferBudget, DefaultBufferBudget)
	o.SendBufferMax = cmp.Or(o.SendBufferMax, netstack.DefaultTCPSendBuffer)
	o.ReceiveBufferMax = cmp.Or(o.ReceiveBufferMax, netstack.DefaultTCPReceiveBufferMax)
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Notef == nil {
		o.Notef = func(string, ...any) {}
	}
	if o.Host == nil {
		o.Host = func() HostState { return HostState{Prefixes: InterfacePrefixes()} }
	}
	maxPending := min(o.MaxFlows, netstack.DefaultMaxPendingTCP)
	e := &Exit{o: o, caps: newFlowCaps(o.MaxFlowsPerPeer, o.MaxFlows), syns: newFlowCaps(min(o.MaxPendingPerPeer, maxPending), maxPending), logs: logLimit{every: time.Second},
		dial: net.Dialer{Timeout: o.ConnectTimeout}, self: map[netip.Addr]bool{}, flows: map[*flow]struct{}{},
		ns: ns, ping: pingState{flows: map[pingKey]*pingFlow{}}, host: hostView{read: o.Host, every: hostEvery}}
	if e.ping.err = probePing(); e.ping.err != nil {
		o.Notef("exit: pings are not relayed: this host gives no unprivileged ICMP socket (%v); allow this user's group in net.ipv4.ping_group_range", e.ping.err)
	}
	for _, a := range o.Tunnel {
		e.self[a.Unmap()] = true
	}
	e.ctx, e.stop = context.WithCancel(context.Background())
	err := ns.SetForwarder(netstack.Forwarder{TCP: e.handleTCP, UDP: e.handleUDP, Ping: e.handlePing, MaxPendingTCP: maxPending, HandshakeTimeout: o.HandshakeTimeout})
	if err != nil {
		e.stop()
		return nil, err
	}
	return e, nil
}

// Close ends every flow and waits for them and for the SYNs being
// answered. The stack keeps taking packets until it closes; new flows
// are refused (ReasonClosing).
func (e *Exit) Close() {
	e.stop()
	e.mu.Lock()
	for f := range e.flows {
		f.abort()
	}
	e.mu.Unlock()
	e.wg.Wait()
}

// refuse counts and maybe logs a refusal.
func (e *Exit) refuse(r Reason, proto string, src, dst netip.AddrPort) {
	e.ctr.refused[r].Add(1)
	if e.logs.allow(r, time.Now()) {
		e.o.Logf("exit: refused %s %v -> %v: %v (further refusals for this reason within a second are only counted)", proto, src, dst, r)
	}
}

// admit runs the checks every new flow passes: a known peer, the policy,
// the caps. It returns the host address to reach and the peer, or a
// refusal.
func (e *Exit) admit(src, dst netip.AddrPort) (target netip.AddrPort, peer string, r Reason) {
	if e.ctx.Err() != nil {
		return target, "", ReasonClosing
	}
	peer, ok := e.o.PeerOf(src.Addr())
	if !ok {
		return target, "", ReasonUnknownPeer
	}
	target = dst
	if e.self[dst.Addr()] && dst.Port() == 53 && len(e.o.DNS) > 0 {
		target = e.o.DNS[0]
	} else if r := e.o.Policy.Check(dst, e.host.get(time.Now())); r != reasonOK {
		return target, "", r
	}
	if r := e.caps.acquire(peer); r != reasonOK {
		return target, "", r
	}
	return target, peer, reasonOK
}

// enter registers a SYN's handler, which may wait for a connect, so that
// Close waits for it; false once Close has begun. Close cancels e.ctx
// before it takes e.mu, so no handler enters after Close waits.
func (e *Exit) enter() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ctx.Err() != nil {
		return false
	}
	e.wg.Add(1)
	return true
}

// track registers f so Close can end it, or reports that the exit closed.
func (e *Exit) track(f *flow, proto int) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ctx.Err() != nil {
		return false
	}
	e.flows[f] = struct{}{}
	if f.resize != nil {
		e.tcpN++
		e.rebalanceLocked(f)
	}
	e.wg.Add(1)
	e.ctr.open[proto].Add(1)
	e.ctr.opened[proto].Add(1)
	return true
}

func (e *Exit) untrack(f *flow, proto int, peer string) {
	e.mu.Lock()
	delete(e.flows, f)
	if f.resize != nil {
		e.tcpN--
		e.rebalanceLocked(nil)
	}
	e.mu.Unlock()
	// Release before the count drops: whoever sees the flow gone may
	// open the next at once.
	e.caps.release(peer)
	e.ctr.open[proto].Add(-1)
	e.wg.Done()
}

// rebalanceLocked gives a new TCP flow (if any) the current shares, and
// every TCP flow new ones when the shares changed.
func (e *Exit) rebalanceLocked(added *flow) {
	want := [2]int{bufferShare(e.o.BufferBudget, e.tcpN, e.o.SendBufferMax), bufferShare(e.o.BufferBudget, e.tcpN, e.o.ReceiveBufferMax)}
	if want == e.shares {
		if added != nil {
			added.resize(want[0], want[1])
		}
		return
	}
	e.shares = want
	for f := range e.flows {
		if f.resize != nil {
			f.resize(want[0], want[1])
		}
	}
}

// handleTCP answers one SYN: connect on the host first, then complete the
// peer's handshake, or RST it.
func (e *Exit) handleTCP(q *netstack.TCPRequest) {
	if !e.enter() {
		e.refuse(ReasonClosing, "tcp", q.Src, q.Dst)
		q.Refuse()
		return
	}
	defer e.wg.Done()
	target, peer, r := e.admit(q.Src, q.Dst)
	// Count before the RST goes out: whoever sees the RST may read the
	// counter.
	if r != reasonOK {
		e.refuse(r, "tcp", q.Src, q.Dst)
		q.Refuse()
		return
	}
	pc, host, ok := e.connectTCP(q, target, peer)
	if !ok {
		e.caps.release(peer)
		return
	}
	var act proxy.Activity
	act.Touch()
	rl := &relay{a: pc, b: host, abortA: pc.Abort, abortB: func() { abortTCP(host) },
		inUse: &e.ctr.bufInUse, moved: [2]*atomic.Uint64{&e.ctr.toHost, &e.ctr.toPeer}, touch: act.Touch}
	f := &flow{abort: rl.abort, resize: pc.SetBufferSizes}
	if !e.track(f, protoTCP) {
		e.caps.release(peer)
		rl.abort()
		return
	}
	defer e.untrack(f, protoTCP, peer)
	stop := make(chan struct{})
	go proxy.CloseWhenIdle(e.ctx, &act, e.o.TCPIdleTimeout, stop, rl.abort)
	rl.run()
	close(stop)
	// The relay has ended both directions; Close is idempotent on both.
	pc.Close()
	host.Close()
}

// connectTCP connects to target on the host, then completes the peer's
// handshake, holding one of the peer's pending slots meanwhile; past the
// peer's share the SYN is dropped. ok false: the SYN was answered or
// dropped, and counted.
func (e *Exit) connectTCP(q *netstack.TCPRequest, target netip.AddrPort, peer string) (pc *netstack.ForwardedTCPConn, host *net.TCPConn, ok bool) {
	if e.syns.acquire(peer) != reasonOK {
		e.refuse(ReasonPeerPending, "tcp", q.Src, q.Dst)
		q.Drop()
		return nil, nil, false
	}
	e.ctr.synsPending.Add(1)
	defer func() {
		e.ctr.synsPending.Add(-1)
		e.syns.release(peer)
	}()
	hc, err := e.dial.DialContext(e.ctx, "tcp", target.String())
	if err != nil {
		e.refuse(connectReason(err), "tcp", q.Src, target)
		q.Refuse()
		return nil, nil, false
	}
	host = hc.(*net.TCPConn)
	pc, err = q.Accept()
	if err != nil {
		e.ctr.handshakeFail.Add(1)
		abortTCP(host)
		return nil, nil, false
	}
	return pc, host, true
}

// handleUDP opens a flow for a new source and destination pair: a host
// socket connected to the destination, so only its replies come back,
// and they reach the peer from the address it wrote to. It runs on the
// packet's delivery path, so it only opens sockets and starts goroutines.
func (e *Exit) handleUDP(q *netstack.UDPRequest) bool {
	target, peer, r := e.admit(q.Src, q.Dst)
	if r != reasonOK {
		e.refuse(r, "udp", q.Src, q.Dst)
		return false
	}
	hc, err := dialHostUDP(e.ctx, target)
	if err != nil {
		e.caps.release(peer)
		e.refuse(connectReason(err), "udp", q.Src, target)
		return false
	}
	pc, err := q.Accept()
	if err != nil {
		e.caps.release(peer)
		hc.Close()
		e.refuse(ReasonConnError, "udp", q.Src, q.Dst)
		return false
	}
	closeBoth := func() { pc.Close(); hc.Close() }
	f := &flow{abort: closeBoth}
	if !e.track(f, protoUDP) {
		e.caps.release(peer)
		closeBoth()
		return true
	}
	go func() {
		defer e.untrack(f, protoUDP, peer)
		var act proxy.Activity
		act.Touch()
		stop := make(chan struct{})
		go proxy.CloseWhenIdle(e.ctx, &act, e.o.UDPIdleTimeout, stop, closeBoth)
		// A DNS flow ends once every query has its answer instead of
		// holding a socket for the idle timeout.
		var dns *dnsFlow
		if q.Dst.Port() == 53 || target.Port() == 53 {
			dns = &dnsFlow{}
		}
		// The length of the peer's last datagram, for the port
		// unreachable that answers it.
		var lastLen atomic.Int64
		lastLen.Store(8)
		refused := func() {
			if e.ns.SendPortUnreachable(q.Dst, q.Src, int(lastLen.Load())) == nil {
				e.ctr.unreachToPeer.Add(1)
			}
		}
		var wg sync.WaitGroup
		wg.Go(func() { e.pumpUDP(hc, pc, &act, &e.ctr.toPeer, closeBoth, dns.answered, nil, refused) })
		e.pumpUDP(pc, hc, &act, &e.ctr.toHost, closeBoth, dns.asked, &lastLen, nil)
		wg.Wait()
		close(stop)
	}()
	return true
}

// dnsFlow counts a DNS flow's queries and answers. A nil *dnsFlow (not
// DNS) never ends its flow.
type dnsFlow struct{ queries, answers atomic.Int64 }

// asked counts a query; it never ends the flow.
func (d *dnsFlow) asked() bool {
	if d != nil {
		d.queries.Add(1)
	}
	return false
}

// answered counts an answer and says whether every query has one.
func (d *dnsFlow) answered() bool {
	return d != nil && d.answers.Add(1) >= d.queries.Load()
}

// pumpUDP moves datagrams from src to dst until either closes, or until
// last, called for each datagram before it is passed on, says it is the
// flow's last. (Counting a query before it leaves keeps its answer from
// being counted first.) size, if set, keeps each datagram's UDP length;
// refused, if set, is called when src (the host socket) reports an ICMP
// port unreachable.
func (e *Exit) pumpUDP(src, dst net.Conn, act *proxy.Activity, moved *atomic.Uint64, closeBoth func(), last func() bool, size *atomic.Int64, refused func()) {
	defer closeBoth()
	buf := make([]byte, udpBufSize)
	for {
		n, err := src.Read(buf)
		if errors.Is(err, syscall.ECONNREFUSED) {
			// An ICMP port unreachable for an earlier datagram: the
			// peer gets one too, from the address it wrote to, and the
			// flow stays until it idles out, as a NAT mapping would.
			if refused != nil {
				refused()
			}
			continue
		}
		if err != nil {
			return
		}
		act.Touch()
		if size != nil {
			size.Store(int64(8 + n))
		}
		end := last()
		e.ctr.bufInUse.Add(int64(n))
		if _, err := dst.Write(buf[:n]); err == nil {
			moved.Add(uint64(n))
		}
		e.ctr.bufInUse.Add(-int64(n))
		if end {
			return
		}
	}
}
