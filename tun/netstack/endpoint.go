package netstack

import (
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// gsoMaxSize is the largest TCP super-packet we let the stack hand us: the
// largest IP packet, so one stack traversal carries up to ~46 segments at
// MTU 1420.
const gsoMaxSize = 1 << 16

// linkEndpoint is the stack.LinkEndpoint between gVisor and the tun.Device
// methods of Net. It has no link header and no goroutines: outbound packets
// go into q and are drained by Net.Read; inbound packets are delivered by
// Net.Write through the dispatcher.
type linkEndpoint struct {
	q   *outQueue
	mtu atomic.Uint32
	gso stack.SupportedGSO

	mu         sync.RWMutex
	dispatcher stack.NetworkDispatcher // guarded by mu
	onClose    func()                  // guarded by mu
}

var (
	_ stack.LinkEndpoint = (*linkEndpoint)(nil)
	_ stack.GSOEndpoint  = (*linkEndpoint)(nil)
)

func newLinkEndpoint(mtu, queueLen int, gso bool) *linkEndpoint {
	e := &linkEndpoint{q: newOutQueue(queueLen), gso: stack.GSONotSupported}
	// HostGSO, not GVisorGSO: with GVisorGSO the TCP endpoint still cuts
	// the super-packet into segments itself and sends each through the IP
	// layer (tcp.sendTCPBatch); with HostGSO one super-packet crosses the
	// stack with a partial checksum and we cut it in Read, where the bytes
	// are copied anyway.
	if gso {
		e.gso = stack.HostGSOSupported
	}
	e.mtu.Store(uint32(mtu))
	return e
}

// WritePackets queues the stack's outbound packets. It returns how many it
// queued; it stops at the first refused packet.
func (e *linkEndpoint) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	n := 0
	for _, pkt := range pkts.AsSlice() {
		if err := e.q.push(pkt, segmentCount(pkt), mayWait(pkt)); err != nil {
			if n == 0 {
				return 0, err
			}
			break
		}
		n++
	}
	return n, nil
}

// mayWait reports whether the goroutine sending pkt may block until Read
// makes room. TCP segments and UDP datagrams come from socket writers, TCP
// processor goroutines and TCP timers, none of which the inbound path
// (Write) ever waits for, so stalling them is safe backpressure; TCP then
// sees its sends slow down instead of losses. Everything else (ICMP echo
// replies and errors, TCP resets for unknown connections, IPv6 neighbour
// and multicast messages) may be sent from inside Write's delivery or with
// network-layer locks held: waiting there could deadlock two Nets wired
// back to back, so those are dropped and counted when the queue is full.
func mayWait(pkt *stack.PacketBuffer) bool {
	switch pkt.TransportProtocolNumber {
	case header.UDPProtocolNumber:
		return true
	case header.TCPProtocolNumber:
		tcp := header.TCP(pkt.TransportHeader().Slice())
		return len(tcp) >= header.TCPMinimumSize && tcp.Flags()&header.TCPFlagRst == 0
	}
	return false
}

// segmentCount is how many wire packets pkt becomes in Read.
func segmentCount(pkt *stack.PacketBuffer) int {
	if !isGSO(pkt) {
		return 1
	}
	return segments(pkt.Data().Size(), int(pkt.GSOOptions.MSS))
}

func isGSO(pkt *stack.PacketBuffer) bool {
	t := pkt.GSOOptions.Type
	return t == stack.GSOTCPv4 || t == stack.GSOTCPv6
}

// segments is how many segments of at most mss payload bytes carry total
// bytes: at least one, which carries the header of an empty segment.
func segments(total, mss int) int {
	if total <= 0 || mss <= 0 {
		return 1
	}
	return (total + mss - 1) / mss
}

func (e *linkEndpoint) MTU() uint32                    { return e.mtu.Load() }
func (e *linkEndpoint) SetMTU(mtu uint32)              { e.mtu.Store(mtu) }
func (*linkEndpoint) MaxHeaderLength() uint16          { return 0 }
func (*linkEndpoint) LinkAddress() tcpip.LinkAddress   { return "" }
func (*linkEndpoint) SetLinkAddress(tcpip.LinkAddress) {}

// Capabilities: RXChecksumOffload because every packet Write delivers was
// authenticated by the WireGuard AEAD (Linux's WireGuard marks decrypted
// packets CHECKSUM_UNNECESSARY for the same reason) and because gVisor's
// GRO leaves the IPv4 header checksum of a merged packet stale. Options has
// verifyChecksums for callers who want the checks anyway.
func (*linkEndpoint) Capabilities() stack.LinkEndpointCapabilities {
	return stack.CapabilityRXChecksumOffload
}

func (e *linkEndpoint) Attach(d stack.NetworkDispatcher) {
	e.mu.Lock()
	e.dispatcher = d
	e.mu.Unlock()
}

func (e *linkEndpoint) IsAttached() bool { return e.getDispatcher() != nil }

func (e *linkEndpoint) getDispatcher() stack.NetworkDispatcher {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.dispatcher
}

// Wait: the endpoint owns no goroutines.
func (*linkEndpoint) Wait() {}

func (*linkEndpoint) ARPHardwareType() header.ARPHardwareType { return header.ARPHardwareNone }
func (*linkEndpoint) AddHeader(*stack.PacketBuffer)           {}
func (*linkEndpoint) ParseHeader(*stack.PacketBuffer) bool    { return true }

// Close is called by the stack when the NIC goes away.
func (e *linkEndpoint) Close() {
	e.mu.Lock()
	f := e.onClose
	e.onClose = nil
	e.mu.Unlock()
	e.q.close()
	if f != nil {
		f()
	}
}

func (e *linkEndpoint) SetOnCloseAction(f func()) {
	e.mu.Lock()
	e.onClose = f
	e.mu.Unlock()
}

// GSOMaxSize implements stack.GSOEndpoint.
func (*linkEndpoint) GSOMaxSize() uint32 { return gsoMaxSize }

// SupportedGSO implements stack.GSOEndpoint.
func (e *linkEndpoint) SupportedGSO() stack.SupportedGSO { return e.gso }
