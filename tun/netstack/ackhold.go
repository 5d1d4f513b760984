package netstack

import (
	"encoding/binary"
	"math/bits"

	"github.com/fips-go/fips-go/internal/packet"
)

// ackHolder thins the pure ACKs peers send for the stack's outbound TCP
// flows when many flows interleave (Options.ACKHold).
//
// Why: every ACK the stack takes wakes its TCP processor, and the stack
// answers each with a send burst as large as the window that ACK freed.
// With many flows sharing a peer, the receiver gets each flow's burst as
// one small super-packet and acknowledges it at once, so bursts shrink to
// what one ACK frees and the small bursts keep the ACKs frequent: 100
// flows through the exit cost several times the ACKs per byte of one.
//
// The rule: the first pure ACK of a flow is held back. When the flow's
// next ACK advances past it, the held one is dropped (ACKs are
// cumulative: the newer one says everything it said) and the new one is
// delivered, so the stack takes every other ACK and sends bursts twice as
// large, which the receiver in turn acknowledges less often. A held ACK
// is delivered when its deadline passes, before any other packet of its
// flow, and before an ACK that does not advance (a duplicate ACK must
// follow the ACK it duplicates for fast retransmit to count it). ACKs with
// SACK blocks, with flags beyond ACK, or with payload are never held, and
// neither is an ACK of the flow whose ACK came just before it (or the
// first ACK of all).
//
// Holding pays only with many flows. A flow's sender may have little else
// in flight, so a held ACK can stall it until its deadline; with a few
// bulk flows that stalled the pipe and cut the exit's throughput to a
// third, while with 100 flows the others fill it and the thinning wins. So
// ACKs are held only while the last epochACKs pure ACKs came from at least
// minFlows distinct flows (counted in a 256-bit set of flow hashes).
//
// It is pure: no clock, no goroutine, no lock; the caller passes the time
// and delivers what it is told to. At most max ACKs are held, each in a
// fixed maxHeldACK-byte slot.
type ackHolder struct {
	hold    int64 // nanoseconds an ACK may be held
	max     int
	held    map[ackKey]*heldACK
	free    []*heldACK
	last    ackKey // the flow of the last pure ACK offered
	hasLast bool

	// The flows of the current epoch's pure ACKs, as a set of hashes;
	// active is how many distinct ones the last full epoch had.
	minFlows int
	seen     [4]uint64
	nseen    int
	active   int

	// Counters: ACKs held, held ACKs dropped because a newer ACK of their
	// flow superseded them, and held ACKs delivered late (another packet
	// of their flow came first, or the deadline passed).
	holds, superseded, released uint64
}

// ackKey names a flow by its addresses and ports as the peer sends them.
type ackKey struct {
	v6           bool
	src, dst     [16]byte
	sport, dport uint16
}

type heldACK struct {
	buf      [maxHeldACK]byte
	n        int
	ack      uint32
	deadline int64
}

// maxHeldACK is the longest pure ACK held: an IPv6 header and a TCP
// header with 40 bytes of options would be 100; IPv4 with options 120.
const maxHeldACK = 128

// epochACKs is how many pure ACKs an epoch of the flow count takes.
const epochACKs = 64

// defaultMinFlows is the fewest distinct flows (by their 8-bit hashes)
// among an epoch's ACKs for ACKs to be held: 64 ACKs spread evenly over
// 40 busy flows show about 32 distinct ones, over 100 flows about 43.
const defaultMinFlows = 32

func newACKHolder(hold int64, max, minFlows int) *ackHolder {
	return &ackHolder{hold: hold, max: max, minFlows: minFlows, held: make(map[ackKey]*heldACK)}
}

// hash mixes k into 8 bits for the epoch's set of flows.
func (k *ackKey) hash() uint8 {
	x := binary.LittleEndian.Uint64(k.src[:8]) ^ binary.LittleEndian.Uint64(k.src[8:])
	x ^= binary.LittleEndian.Uint64(k.dst[:8])*0x9e3779b97f4a7c15 ^ binary.LittleEndian.Uint64(k.dst[8:])
	x ^= uint64(k.sport)<<16 | uint64(k.dport)
	x *= 0xff51afd7ed558ccd
	return uint8(x >> 56)
}

// countFlow adds a pure ACK's flow to the epoch's set.
func (h *ackHolder) countFlow(k *ackKey) {
	b := k.hash()
	h.seen[b>>6] |= 1 << (b & 63)
	h.nseen++
	if h.nseen == epochACKs {
		h.active = bits.OnesCount64(h.seen[0]) + bits.OnesCount64(h.seen[1]) + bits.OnesCount64(h.seen[2]) + bits.OnesCount64(h.seen[3])
		h.seen, h.nseen = [4]uint64{}, 0
	}
}

// tcpInfo is what the holder reads from a TCP packet.
type tcpInfo struct {
	key      ackKey
	ack      uint32
	holdable bool // a pure ACK: flags exactly ACK, no payload, no SACK option
}

// parseTCP reads p's flow key and whether it is a holdable pure ACK; ok is
// false if p is not a well-formed TCP packet: IPv4 that is not a
// fragment, or IPv6 whose first next header is TCP. It checks what
// packet.Parse checks through the same header views, without building an
// Info (BenchmarkParseTCP): it runs on every
// TCP packet Write takes while ACKs are thinned.
func parseTCP(p []byte) (t tcpInfo, ok bool) {
	var l4 []byte
	switch packet.Version(p) {
	case 4:
		if len(p) < packet.IPv4HeaderLen {
			return t, false
		}
		h := packet.IPv4Header(p)
		ihl, total := h.HeaderLen(), h.TotalLen()
		if h.Protocol() != packet.ProtoTCP || ihl < packet.IPv4HeaderLen || total < ihl || total > len(p) || h.Fragment() {
			return t, false
		}
		copy(t.key.src[:], h.Src())
		copy(t.key.dst[:], h.Dst())
		l4 = p[ihl:total]
	case 6:
		if len(p) < packet.IPv6HeaderLen {
			return t, false
		}
		h := packet.IPv6Header(p)
		total := packet.IPv6HeaderLen + h.PayloadLen()
		if h.NextHeader() != packet.ProtoTCP || total > len(p) {
			return t, false
		}
		t.key.v6 = true
		copy(t.key.src[:], h.Src())
		copy(t.key.dst[:], h.Dst())
		l4 = p[packet.IPv6HeaderLen:total]
	default:
		return t, false
	}
	if len(l4) < packet.TCPHeaderLen {
		return t, false
	}
	tcp := packet.TCPHeader(l4)
	off := tcp.HeaderLen()
	if off < packet.TCPHeaderLen || off > len(l4) {
		return t, false
	}
	t.key.sport, t.key.dport = tcp.SrcPort(), tcp.DstPort()
	t.ack = tcp.Ack()
	t.holdable = tcp.Flags() == packet.TCPAck && off == len(l4) && len(p) <= maxHeldACK && !hasSACK(l4[packet.TCPHeaderLen:off])
	return t, true
}

// hasSACK reports whether the TCP options opts hold a SACK block (kind 5).
// A malformed option list counts as one, so such an ACK is never held.
func hasSACK(opts []byte) bool {
	for i := 0; i < len(opts); {
		switch opts[i] {
		case 0: // end of options
			return false
		case 1: // no-op
			i++
			continue
		case 5:
			return true
		}
		if i+1 >= len(opts) || opts[i+1] < 2 || i+int(opts[i+1]) > len(opts) {
			return true
		}
		i += int(opts[i+1])
	}
	return false
}

// offer decides about one inbound TCP packet described by t (from
// parseTCP of p) at time now. It returns a held ACK to deliver before p
// (nil if none; the slice is valid only until the next call) and whether
// p itself is to be delivered now; if not, the holder has copied it.
func (h *ackHolder) offer(p []byte, t tcpInfo, now int64) (before []byte, deliver bool) {
	pass := false // deliver a new pure ACK at once: a lone flow, or too few flows
	if t.holdable {
		pass = !h.hasLast || t.key == h.last || h.active < h.minFlows
		h.last, h.hasLast = t.key, true
		h.countFlow(&t.key)
	}
	if prev := h.held[t.key]; prev != nil {
		delete(h.held, t.key)
		h.free = append(h.free, prev)
		if t.holdable && int32(t.ack-prev.ack) > 0 {
			h.superseded++
			return nil, true
		}
		h.released++
		return prev.buf[:prev.n], true
	}
	if !t.holdable || pass || len(h.held) >= h.max {
		return nil, true
	}
	var e *heldACK
	if k := len(h.free); k > 0 {
		e, h.free = h.free[k-1], h.free[:k-1]
	} else {
		e = new(heldACK)
	}
	e.n = copy(e.buf[:], p)
	e.ack = t.ack
	e.deadline = now + h.hold
	h.held[t.key] = e
	h.holds++
	return nil, false
}

// expire calls deliver with each held ACK whose deadline is at or before
// now (the slice is valid only during the call), forgets them, and returns
// the earliest deadline still held, or 0 if nothing is.
func (h *ackHolder) expire(now int64, deliver func([]byte)) (next int64) {
	for k, e := range h.held {
		if e.deadline <= now {
			delete(h.held, k)
			h.free = append(h.free, e)
			h.released++
			deliver(e.buf[:e.n])
			continue
		}
		if next == 0 || e.deadline < next {
			next = e.deadline
		}
	}
	return next
}
