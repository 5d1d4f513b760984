package pmtu

import (
	"net/netip"
	"time"

	"github.com/fips-go/fips-go/internal/packet"
)

// Retransmits spots an MTU black hole from the inner TCP's own behaviour,
// for a peer that answers no probes (a stock WireGuard): a full-size
// segment the path drops is sent again at each retransmission timeout,
// unchanged (same flow, sequence number and length), while an ordinary
// loss is repaired by the first resend. The caller feeds it the full-size
// packets it sends to one peer; the third sending of one segment, each at
// least resendGap after the one before and all within an episode, is
// reported. It keeps one segment for each of at most RetransmitSlots
// flows (the oldest flow's slot is reused), and is pure: every call takes
// now. It cannot tell a path that drops every full-size packet from one
// that drops the same segment three times for other reasons; the caller
// makes what it concludes expire.
type Retransmits struct {
	slots [RetransmitSlots]tracked
	next  int // the slot a new flow takes
}

// RetransmitSlots bounds the flows a Retransmits follows at once.
const RetransmitSlots = 8

const (
	// resendGap is the least time between two sendings that count: a
	// retransmission timeout is at least 200 ms in Linux, and a burst of
	// fast resends is no black hole's pattern.
	resendGap = 150 * time.Millisecond
	// episode is how long a flow's tracked segment is kept while newer
	// data of the flow passes: by then it was acknowledged.
	episode = 3 * time.Second
	// resendSpan bounds the sendings of one segment that count together:
	// three at the longest initial timeouts (1, 2 and 4 s) fit well.
	resendSpan = 30 * time.Second
	// resends is the sending of one segment that is reported.
	resends = 3
)

type flowKey struct {
	src, dst         netip.Addr
	srcPort, dstPort uint16
}

type tracked struct {
	flow        flowKey
	seq         uint32
	length      int
	sends       int
	first, last time.Time
}

// Sent records a packet sent to the peer and reports whether it is the
// resending that marks a black hole. Anything but a TCP segment with
// data, a malformed packet included, is ignored.
func (r *Retransmits) Sent(pkt []byte, now time.Time) bool {
	in, err := packet.Parse(pkt)
	if err != nil || in.Proto != packet.ProtoTCP || len(in.Payload) == 0 {
		return false
	}
	key := flowKey{in.Src, in.Dst, in.SrcPort, in.DstPort}
	for i := range r.slots {
		s := &r.slots[i]
		if s.sends == 0 || s.flow != key {
			continue
		}
		return s.sent(in.Seq, len(in.Payload), now)
	}
	r.slots[r.next] = tracked{flow: key, seq: in.Seq, length: len(in.Payload), sends: 1, first: now, last: now}
	r.next = (r.next + 1) % len(r.slots)
	return false
}

// sent is Sent for a flow already tracked.
func (s *tracked) sent(seq uint32, length int, now time.Time) bool {
	d := int32(seq - s.seq)
	switch {
	case d == 0 && length == s.length:
		if now.Sub(s.last) < resendGap {
			return false
		}
		if now.Sub(s.first) > resendSpan {
			break // the same bytes much later: a new episode
		}
		s.sends++
		s.last = now
		return s.sends == resends
	case d > 0 && now.Sub(s.first) <= episode:
		return false // newer data while the tracked segment may be in flight
	}
	// An earlier segment (the one a timeout resends), one cut anew, or
	// newer data after the episode: follow it instead.
	*s = tracked{flow: s.flow, seq: seq, length: length, sends: 1, first: now, last: now}
	return false
}
