package netstack

import "sync/atomic"

// counters are the data-path counters, updated without locks.
type counters struct {
	packetsIn, bytesIn, invalidIn      atomic.Uint64
	packetsOut, bytesOut               atomic.Uint64
	gsoPackets, gsoSegments, gsoErrors atomic.Uint64
	oversize                           atomic.Uint64
}

// Stats are a Net's cumulative counters plus the queue's current state.
type Stats struct {
	PacketsIn  uint64 // packets Write handed to the stack
	BytesIn    uint64
	InvalidIn  uint64 // packets Write dropped as malformed (or with bad checksums under VerifyChecksums)
	PacketsOut uint64 // packets Read returned
	BytesOut   uint64

	GSOPackets  uint64 // TCP super-packets the stack sent
	GSOSegments uint64 // packets Read cut from them
	GSOErrors   uint64 // super-packets dropped because their headers did not parse
	Oversize    uint64 // packets dropped because they did not fit a Read buffer (never expected)

	QueueLen       int    // wire packets queued now
	QueueHighWater int    // most wire packets ever queued
	QueueWaits     uint64 // times a stack sender waited for queue room (backpressure)
	QueueDrops     uint64 // packets refused on a full queue because their sender must not wait (ICMP, TCP RST, NDP)

	// Options.ACKHold: pure ACKs held, held ACKs dropped because a newer
	// ACK of their flow superseded them, and held ACKs delivered late
	// (their deadline passed, or another packet of their flow came).
	ACKsHeld, ACKsSuperseded, ACKsReleased uint64

	// From the stack's own counters.
	TCPSegmentsSent     uint64
	TCPSegmentsReceived uint64 // after GRO, so fewer than the packets written
	TCPRetransmits      uint64
	// TCPSpuriousRecoveries counts loss recoveries the stack later found
	// needless (the peer reported the retransmission as a duplicate).
	TCPSpuriousRecoveries uint64
	TCPSendErrors         uint64
	// TCPConnections is the number of TCP connections now past the
	// handshake and not yet closed, TIME-WAIT included: what closed
	// connections still hold until it drains.
	TCPConnections uint64
}

// Stats returns a snapshot of the counters.
func (n *Net) Stats() Stats {
	q := n.ep.q.stats()
	tcp := n.stack.Stats().TCP
	held, superseded, released := n.ack.stats()
	return Stats{
		ACKsHeld:              held,
		ACKsSuperseded:        superseded,
		ACKsReleased:          released,
		PacketsIn:             n.ctr.packetsIn.Load(),
		BytesIn:               n.ctr.bytesIn.Load(),
		InvalidIn:             n.ctr.invalidIn.Load(),
		PacketsOut:            n.ctr.packetsOut.Load(),
		BytesOut:              n.ctr.bytesOut.Load(),
		GSOPackets:            n.ctr.gsoPackets.Load(),
		GSOSegments:           n.ctr.gsoSegments.Load(),
		GSOErrors:             n.ctr.gsoErrors.Load(),
		Oversize:              n.ctr.oversize.Load(),
		QueueLen:              q.slots,
		QueueHighWater:        q.highWater,
		QueueWaits:            q.waits,
		QueueDrops:            q.drops,
		TCPSegmentsSent:       tcp.SegmentsSent.Value(),
		TCPSegmentsReceived:   tcp.ValidSegmentsReceived.Value(),
		TCPRetransmits:        tcp.Retransmits.Value(),
		TCPSpuriousRecoveries: tcp.SpuriousRecovery.Value(),
		TCPSendErrors:         tcp.SegmentSendErrors.Value(),
		TCPConnections:        tcp.CurrentConnected.Value(),
	}
}
