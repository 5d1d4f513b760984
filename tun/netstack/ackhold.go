package netstack

import (
	"encoding/binary"
	"math/bits"
)

// ackHolder thins the pure ACKs peers send for the stack's outbound TCP
// flows when many flows interleave (Options.ACKHold).
//
// Why: every ACK the stack takes wakes its TCP processor, and the stack
// answers each with a send burst as large as the window that ACK freed.
// With many flows sharing a peer, the receiver gets each flow's burst as
// one small super-packet and acknowledges it at once, so bursts shrink to
// what one ACK frees and the small bursts keep the ACKs frequent: 100
// flows through the exit cost 52,000 ACKs per GB against 12,000 for one.
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
// in flight, so a held ACK can stall it until its deadline; with 2 to 10
// bulk flows that stalled the pipe and cut the exit's throughput to a
// third (bench-exit with iperf3 -P 2, 4, 10: 0.9-2.5 Gbit/s against 4.8-
// 5.5), while with 100 flows the others fill it and the thinning wins. So
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
// fragment, or IPv6 whose first next header is TCP.
func parseTCP(p []byte) (t tcpInfo, ok bool) {
	var l4 []byte
	switch {
	case len(p) >= 20 && p[0]>>4 == 4:
		ihl := int(p[0]&0xf) * 4
		total := int(binary.BigEndian.Uint16(p[2:]))
		// Fragment offset or more-fragments set: not a whole segment.
		if p[9] != 6 || ihl < 20 || total < ihl || total > len(p) || binary.BigEndian.Uint16(p[6:])&0x3fff != 0 {
			return t, false
		}
		copy(t.key.src[:4], p[12:16])
		copy(t.key.dst[:4], p[16:20])
		l4 = p[ihl:total]
	case len(p) >= 40 && p[0]>>4 == 6:
		total := 40 + int(binary.BigEndian.Uint16(p[4:]))
		if p[6] != 6 || total > len(p) {
			return t, false
		}
		t.key.v6 = true
		copy(t.key.src[:], p[8:24])
		copy(t.key.dst[:], p[24:40])
		l4 = p[40:total]
	default:
		return t, false
	}
	if len(l4) < 20 {
		return t, false
	}
	off := int(l4[12]>>4) * 4
	if off < 20 || off > len(l4) {
		return t, false
	}
	t.key.sport = binary.BigEndian.Uint16(l4[0:])
	t.key.dport = binary.BigEndian.Uint16(l4[2:])
	t.ack = binary.BigEndian.Uint32(l4[8:])
	const flagACK = 0x10
	t.holdable = l4[13] == flagACK && off == len(l4) && len(p) <= maxHeldACK && !hasSACK(l4[20:off])
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
	alone := false
	if t.holdable {
		alone = !h.hasLast || t.key == h.last || h.active < h.minFlows
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
	if !t.holdable || alone || len(h.held) >= h.max {
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
