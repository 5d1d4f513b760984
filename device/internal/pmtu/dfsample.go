package pmtu

import (
	"time"

	"github.com/fips-go/fips-go/internal/packet"
)

// DFSamples tells, for a peer that answers no probes, whether an IPv4 path
// carries the tunnel's full-size datagrams whole. fips-go sends IPv4
// datagrams with DF clear, as kernel WireGuard does, so a narrow path costs
// throughput (every datagram fragmented by a router) rather than
// reachability, and no ICMP ever says so. Now and then the datagram of one
// real full-size TCP segment goes with DF set instead (a sample):
//
//   - where the router's ICMP passes, its answer teaches the kernel the
//     path MTU, which the caller reads from the socket;
//   - where it is filtered, the datagram is lost and the inner TCP sends
//     the segment again, which the caller shows Seen: SampleLosses samples
//     lost in a row are a black hole above the path's MTU (DFBlackHole);
//   - a sample not sent again within SampleWait went through, and
//     SamplePasses of them in a row say the path carries full-size
//     datagrams (DFFits).
//
// A lost sample costs the inner TCP one resent segment, which goes out
// fragmented as before. The bytes on the wire are WireGuard's own; only
// the DF bit differs, which every other WireGuard on Linux sets on all of
// its datagrams. It is pure: every call takes now.
type DFSamples struct {
	pend   [SamplesPending]dfSample
	lost   int // samples lost in a row
	passed int // samples that went through in a row
	next   time.Time
}

// DFVerdict is what the samples concluded.
type DFVerdict int

const (
	DFUndecided DFVerdict = iota
	DFFits                // full-size datagrams pass with DF set
	DFBlackHole           // they vanish: no ICMP, and the inner TCP resends them
)

const (
	// SampleEvery is the least time between two samples.
	SampleEvery = 250 * time.Millisecond
	// SampleWait is how long a sample's segment may take to be sent
	// again before the sample counts as passed: the inner TCP repairs a
	// single loss by fast retransmission within a round trip or two, and
	// its least retransmission timeout is 200 ms.
	SampleWait = time.Second
	// SampleLosses is how many samples lost in a row make a black hole:
	// one lost to congestion or chance is not.
	SampleLosses = 3
	// SamplePasses is how many samples through in a row say the path
	// fits.
	SamplePasses = 2
	// SamplesPending bounds the samples awaiting a verdict.
	SamplesPending = 4
)

type dfSample struct {
	flow flowKey
	seq  uint32
	at   time.Time
	used bool
}

// Due reports whether a sample may be taken now.
func (s *DFSamples) Due(now time.Time) bool { return !now.Before(s.next) }

// Take makes pkt, a full-size packet about to be sent, the next sample if
// it is a TCP segment with data and a sample is due; the caller then sends
// its datagram with DF set. A malformed packet is never taken.
func (s *DFSamples) Take(pkt []byte, now time.Time) bool {
	if !s.Due(now) {
		return false
	}
	in, err := packet.Parse(pkt)
	if err != nil || in.Proto != packet.ProtoTCP || len(in.Payload) == 0 {
		return false
	}
	key := flowKey{in.Src, in.Dst, in.SrcPort, in.DstPort}
	slot := -1
	for i := range s.pend {
		p := &s.pend[i]
		if p.used && p.flow == key && p.seq == in.Seq {
			return false // a resend of a sample is no new sample
		}
		if !p.used && slot < 0 {
			slot = i
		}
	}
	if slot < 0 {
		return false // all waiting: Expire frees them
	}
	s.pend[slot] = dfSample{flow: key, seq: in.Seq, at: now, used: true}
	s.next = now.Add(SampleEvery)
	return true
}

// Pending reports whether a sample awaits its verdict: only then does
// Seen need the packets sent.
func (s *DFSamples) Pending() bool {
	for i := range s.pend {
		if s.pend[i].used {
			return true
		}
	}
	return false
}

// Seen looks at a full-size packet sent to the peer: a sample's segment
// sent again means the sample was lost.
func (s *DFSamples) Seen(pkt []byte, now time.Time) DFVerdict {
	in, err := packet.Parse(pkt)
	if err != nil || in.Proto != packet.ProtoTCP || len(in.Payload) == 0 {
		return DFUndecided
	}
	key := flowKey{in.Src, in.Dst, in.SrcPort, in.DstPort}
	for i := range s.pend {
		p := &s.pend[i]
		if !p.used || p.flow != key || p.seq != in.Seq {
			continue
		}
		if now.Sub(p.at) > SampleWait {
			return DFUndecided // Expire's to judge
		}
		p.used = false
		s.lost++
		s.passed = 0
		if s.lost >= SampleLosses {
			s.Reset()
			return DFBlackHole
		}
	}
	return DFUndecided
}

// Expire counts the samples not sent again within SampleWait as passed.
func (s *DFSamples) Expire(now time.Time) DFVerdict {
	for i := range s.pend {
		p := &s.pend[i]
		if !p.used || now.Sub(p.at) <= SampleWait {
			continue
		}
		p.used = false
		s.passed++
		s.lost = 0
		if s.passed >= SamplePasses {
			s.Reset()
			return DFFits
		}
	}
	return DFUndecided
}

// Reset forgets every sample and count, as for a new path.
func (s *DFSamples) Reset() { *s = DFSamples{next: s.next} }
