// Package netstack is a userspace TCP/IP stack (gVisor's tcpip) behind the
// tun.Device interface, for running fips-go without root: applications dial
// and listen through Net, and the tunnel reads and writes IP packets.
//
// The link endpoint is ours and built for throughput: the stack hands TCP
// super-packets of up to 64 KiB (GSO) which Read cuts into MTU-sized packets
// while copying them out, Read returns a whole batch per wakeup, Write
// coalesces inbound TCP segments with gVisor's GRO before the stack sees
// them, and the outbound queue is bounded and applies backpressure to the
// stack's senders instead of dropping.
package netstack

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/fips-go/fips-go/tun"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/stack/gro"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
)

// Defaults for zero Options fields.
const (
	DefaultMTU                 = 1420
	defaultQueueLen            = 256
	defaultBatchSize           = 128
	DefaultTCPReceiveBufferMax = 8 << 20
	DefaultTCPSendBuffer       = 6 << 20
	// DefaultTCPTimeWait is how long a closed connection lingers in
	// TIME-WAIT; see applyTCPOptions for why not gVisor's 60 s.
	DefaultTCPTimeWait = 5 * time.Second
	// defaultCongestionControl was chosen by measurement; see
	// applyTCPOptions.
	defaultCongestionControl = "reno"
	// DefaultName is what Name reports when Options.Name is empty.
	DefaultName = "netstack"
)

const (
	nicID            = 1
	minBufferSize    = 4 << 10
	maxBufferSize    = 1 << 30
	minMTU           = 576 // RFC 791: every IPv4 host must accept this
	minMTUIPv6       = 1280
	maxMTU           = 65535
	defaultRcvBuffer = 1 << 20 // where receive-buffer auto-tuning starts
	// maxACKHold bounds Options.ACKHold well below the stack's minimum
	// RTO (200 ms), so a held ACK can never look like a lost one.
	maxACKHold = 20 * time.Millisecond
	// slackBelow is the longest timer TimerSlack delays: the stack's
	// minimum RTO, below which only the loss probe and reorder timers run.
	slackBelow = 200 * time.Millisecond
	// maxTimerSlack bounds Options.TimerSlack: loss detection may wait
	// that much longer.
	maxTimerSlack = 20 * time.Millisecond
	// maxHeldACKs bounds the ACKs held at once (each a 128-byte slot).
	maxHeldACKs = 1024
)

// Options configure a Net; the zero value works (a stack with no addresses).
type Options struct {
	// Addresses are the stack's own IPv4 and IPv6 addresses.
	Addresses []netip.Addr
	// MTU of the device; default DefaultMTU. At least 576, and 1280 if
	// there is an IPv6 address.
	MTU int
	// Name is what Name reports; default DefaultName.
	Name string
	// TCPTimeWait is how long a connection this side closed first stays in
	// TIME-WAIT, holding its memory (about 6.5 KiB) and its port; default
	// DefaultTCPTimeWait.
	TCPTimeWait time.Duration
	// ACKHold, if positive (at most 20 ms), thins the peer's pure ACKs
	// while many TCP flows (about 40 or more) interleave them: a flow's
	// ACK is held up to 1.25 times ACKHold for the next, which supersedes
	// it, so the stack answers about every other ACK with a burst twice as
	// large (see ackHolder). For a stack that sends bulk data to many
	// flows at once, as an exit does; with fewer flows nothing is held.
	ACKHold time.Duration
	// TimerSlack, if positive (at most 20 ms), fires the TCP timers
	// shorter than 200 ms (the tail-loss probe, the RACK reorder timer)
	// that much later, as Linux does with 2 ms; see slackClock.
	TimerSlack time.Duration
	// Promiscuous makes the stack accept packets to any address and
	// answer from it, which SetForwarder needs: the server side of a
	// relay. Packets between the stack's own addresses then leave through
	// the device, and packets to loopback addresses are accepted from it.
	Promiscuous bool
	// Logf receives rare events (never per packet); nil discards.
	Logf func(format string, args ...any)

	// Decided, not exposed; benchmarks and tests set them.

	// queueLen bounds the outbound queue, in MTU-sized packets (default
	// 256): its ceiling is about queueLen*MTU plus one 64 KiB super-packet.
	queueLen int
	// batchSize is what BatchSize reports (default 128).
	batchSize int
	// tcpReceiveBufferMax caps receive-buffer auto-tuning (default
	// DefaultTCPReceiveBufferMax); tcpSendBuffer is each connection's send
	// buffer (default DefaultTCPSendBuffer).
	tcpReceiveBufferMax int
	tcpSendBuffer       int
	// congestionControl is "reno" or "cubic" (default reno; see
	// applyTCPOptions).
	congestionControl string
	// disableGSO makes the stack send MTU-sized segments only.
	disableGSO bool
	// disableRACK turns off RACK-TLP loss detection (RFC 8985); see
	// applyTCPOptions for why it is on.
	disableRACK bool
	// verifyChecksums makes Write check IP and transport checksums: off,
	// since the AEAD already authenticated every packet from the tunnel.
	verifyChecksums bool
}

// Net is a gVisor stack and the tun.Device its packets flow through. All
// methods are safe for concurrent use; Read is meant for one reader at a
// time (concurrent calls are serialised).
type Net struct {
	opts  Options
	stack *stack.Stack
	ep    *linkEndpoint

	events    chan tun.Event
	closeOnce sync.Once

	// closeMu guards closed; Write holds it for reading while it delivers
	// so Close does not tear the stack down under it. closeMu and readMu
	// are never held together.
	closeMu sync.RWMutex
	closed  bool

	// readMu serialises Read and guards seg and batch.
	readMu sync.Mutex
	seg    segmenter // a super-packet whose segments did not fit the last Read
	batch  []queued

	// gros holds the GRO engines, one per concurrent Write; an engine is
	// about 4 KiB, so there are as many as can run at once, not one per call.
	gros chan *gro.GRO

	ack ackThinning

	ctr counters
}

var _ tun.Device = (*Net)(nil)

func (o *Options) normalize() error {
	setDefault(&o.MTU, DefaultMTU)
	setDefault(&o.queueLen, defaultQueueLen)
	setDefault(&o.batchSize, defaultBatchSize)
	setDefault(&o.tcpReceiveBufferMax, DefaultTCPReceiveBufferMax)
	setDefault(&o.tcpSendBuffer, DefaultTCPSendBuffer)
	if o.TCPTimeWait == 0 {
		o.TCPTimeWait = DefaultTCPTimeWait
	}
	if o.congestionControl == "" {
		o.congestionControl = defaultCongestionControl
	}
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	switch {
	case o.MTU < minMTU || o.MTU > maxMTU:
		return fmt.Errorf("netstack: MTU %d out of range [%d, %d]", o.MTU, minMTU, maxMTU)
	case o.queueLen < 0 || o.batchSize < 0:
		return fmt.Errorf("netstack: negative QueueLen %d or BatchSize %d", o.queueLen, o.batchSize)
	case o.tcpReceiveBufferMax < minBufferSize || o.tcpReceiveBufferMax > maxBufferSize:
		return fmt.Errorf("netstack: TCPReceiveBufferMax %d out of range [%d, %d]", o.tcpReceiveBufferMax, minBufferSize, maxBufferSize)
	case o.tcpSendBuffer < minBufferSize || o.tcpSendBuffer > maxBufferSize:
		return fmt.Errorf("netstack: TCPSendBuffer %d out of range [%d, %d]", o.tcpSendBuffer, minBufferSize, maxBufferSize)
	case o.ACKHold < 0 || o.ACKHold > maxACKHold:
		return fmt.Errorf("netstack: ACKHold %v out of range [0, %v]", o.ACKHold, maxACKHold)
	case o.TimerSlack < 0 || o.TimerSlack > maxTimerSlack:
		return fmt.Errorf("netstack: TimerSlack %v out of range [0, %v]", o.TimerSlack, maxTimerSlack)
	case o.TCPTimeWait < 0:
		return fmt.Errorf("netstack: negative TCPTimeWait %v", o.TCPTimeWait)
	case o.congestionControl != "reno" && o.congestionControl != "cubic":
		return fmt.Errorf("netstack: unknown congestion control %q (want reno or cubic)", o.congestionControl)
	}
	seen := make(map[netip.Addr]bool, len(o.Addresses))
	for _, a := range o.Addresses {
		if !a.IsValid() || a.IsUnspecified() || a.Is4In6() || a.Zone() != "" {
			return fmt.Errorf("netstack: invalid address %v", a)
		}
		if seen[a] {
			return fmt.Errorf("netstack: duplicate address %v", a)
		}
		seen[a] = true
		if a.Is6() && o.MTU < minMTUIPv6 {
			return fmt.Errorf("netstack: MTU %d is below IPv6's minimum %d", o.MTU, minMTUIPv6)
		}
	}
	return nil
}

// setDefault replaces a zero *v with def; negative values are left for
// validation to reject.
func setDefault(v *int, def int) {
	if *v == 0 {
		*v = def
	}
}

// New builds a stack with the options' addresses and a default route for
// each IP family through the device.
func New(opts Options) (*Net, error) {
	opts.Addresses = append([]netip.Addr(nil), opts.Addresses...)
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	var clock tcpip.Clock
	if opts.TimerSlack > 0 {
		clock = slackClock{Clock: tcpip.NewStdClock(), slack: opts.TimerSlack, below: slackBelow}
	}
	s := stack.New(stack.Options{
		Clock: clock,
		NetworkProtocols: []stack.NetworkProtocolFactory{
			ipv4.NewProtocolWithOptions(ipv4.Options{AllowExternalLoopbackTraffic: opts.Promiscuous}),
			ipv6.NewProtocolWithOptions(ipv6.Options{AllowExternalLoopbackTraffic: opts.Promiscuous}),
		},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol, icmp.NewProtocol4, icmp.NewProtocol6},
		// Connections to the stack's own addresses stay inside it. Not
		// when promiscuous: with every address "ours", gVisor would take
		// each peer's source address for a local one and drop its packets.
		HandleLocal: !opts.Promiscuous,
	})
	n := &Net{
		opts:   opts,
		stack:  s,
		ep:     newLinkEndpoint(opts.MTU, opts.queueLen, !opts.disableGSO),
		events: make(chan tun.Event, 1),
		gros:   make(chan *gro.GRO, max(2, runtime.GOMAXPROCS(0))),
	}
	if err := n.configure(); err != nil {
		s.Destroy()
		return nil, err
	}
	n.ack.init(opts.ACKHold, n.expireACKs)
	for range cap(n.gros) {
		g := new(gro.GRO)
		g.Init(true)
		n.gros <- g
	}
	n.events <- tun.EventUp
	opts.Logf("netstack: up with addresses %v, MTU %d, GSO %v, TCP %s (RACK %v), queue %d packets",
		opts.Addresses, opts.MTU, !opts.disableGSO, opts.congestionControl, !opts.disableRACK, opts.queueLen)
	return n, nil
}

func (n *Net) configure() error {
	if err := n.applyTCPOptions(); err != nil {
		return err
	}
	for _, proto := range []tcpip.NetworkProtocolNumber{ipv4.ProtocolNumber, ipv6.ProtocolNumber} {
		// A tunnel endpoint is a host, not a router.
		if err := n.stack.SetForwardingDefaultAndAllNICs(proto, false); err != nil {
			return tcpipErr("disable forwarding", err)
		}
	}
	if err := n.stack.CreateNICWithOptions(nicID, n.ep, stack.NICOptions{Name: n.opts.Name}); err != nil {
		return tcpipErr("create NIC", err)
	}
	if n.opts.Promiscuous {
		if err := n.stack.SetPromiscuousMode(nicID, true); err != nil {
			return tcpipErr("promiscuous mode", err)
		}
		if err := n.stack.SetSpoofing(nicID, true); err != nil {
			return tcpipErr("spoofing", err)
		}
	}
	for _, a := range n.opts.Addresses {
		pa := tcpip.ProtocolAddress{
			Protocol:          ipv4.ProtocolNumber,
			AddressWithPrefix: tcpip.AddrFromSlice(a.AsSlice()).WithPrefix(),
		}
		if a.Is6() {
			pa.Protocol = ipv6.ProtocolNumber
		}
		if err := n.stack.AddProtocolAddress(nicID, pa, stack.AddressProperties{}); err != nil {
			return tcpipErr("add address "+a.String(), err)
		}
	}
	n.stack.SetRouteTable([]tcpip.Route{
		{Destination: header.IPv4EmptySubnet, NIC: nicID},
		{Destination: header.IPv6EmptySubnet, NIC: nicID},
	})
	return nil
}

// MTU implements tun.Device.
func (n *Net) MTU() (int, error) { return n.opts.MTU, nil }

// Name implements tun.Device.
func (n *Net) Name() (string, error) { return n.opts.Name, nil }

// Events implements tun.Device: one EventUp, closed by Close.
func (n *Net) Events() <-chan tun.Event { return n.events }

// BatchSize implements tun.Device.
func (n *Net) BatchSize() int { return n.opts.batchSize }

// File implements tun.Device; a netstack has no file.
func (n *Net) File() *os.File { return nil }

// Close implements tun.Device: blocked Reads return tun.ErrGone, stack
// goroutines waiting for queue room give up, every connection is reset,
// the stack's goroutines exit and Events is closed. Closing twice is not an
// error.
func (n *Net) Close() error {
	n.closeOnce.Do(func() {
		// First wake everything that waits on the queue: TCP senders
		// blocked there hold their endpoint's lock, which the stack
		// teardown below needs.
		n.ep.q.close()
		n.closeMu.Lock()
		n.closed = true
		n.closeMu.Unlock()
		// After closed: no Write can set the timer again.
		n.ack.stop()
		n.stack.Destroy()
		n.readMu.Lock()
		n.seg.release()
		n.readMu.Unlock()
		close(n.events)
	})
	return nil
}

// errClosed wraps os.ErrClosed for the dial and listen functions.
var errClosed = fmt.Errorf("netstack: %w", os.ErrClosed)

// isClosed reports whether Close has started.
func (n *Net) isClosed() bool {
	n.closeMu.RLock()
	defer n.closeMu.RUnlock()
	return n.closed
}

// tcpipErr turns a gVisor error into a Go error.
func tcpipErr(op string, err tcpip.Error) error {
	if err == nil {
		return nil
	}
	return errors.New("netstack: " + op + ": " + err.String())
}
