package pmtu

import (
	"encoding/binary"
	"hash/maphash"
	"time"

	"github.com/fips-go/fips-go/internal/packet"
)

// DFSamples finds, for a peer that answers no probes, whether full-size
// datagrams reach it, from samples: real full-size TCP segments, followed
// for a while. A sample's segment sent again by the inner TCP was lost;
// one not sent again within SampleWait went through. SampleLosses lost in
// a row (no sample taken after them through) are a black hole
// (Seen reports it); the caller then sets a floor. A sample that went through
// counts only if no later one was lost meanwhile: passes are known
// SampleWait late, losses a round trip or a retransmission timeout late.
//
// Over IPv4, where fips-go's datagrams leave with DF clear and a router
// fragments what does not fit, the caller sends each sample's datagram
// with DF set: where the router's ICMP passes its answer teaches the
// kernel the path MTU, and where it is filtered the datagram is lost and
// the inner TCP sends the segment again (fragmented, so it arrives). Over
// IPv6, whose routers never fragment, every full-size datagram is a
// sample as it is sent. A lost sample costs the inner TCP nothing it
// would not have lost anyway, or one resent segment for a DF sample. It
// is pure: every call takes now.
type DFSamples struct {
	pend [SamplesPending]dfSample
	lost int // samples lost in a row
	// lastLost is when the newest sample known lost was taken: a pass of
	// an older one says nothing of the path since.
	lastLost time.Time
	next     time.Time
}

const (
	// SampleEvery is the least time between two samples.
	SampleEvery = 250 * time.Millisecond
	// SampleWait is how long a sample's segment may take to be sent
	// again before the sample counts as passed: a single loss is
	// repaired by fast retransmission within a round trip or two, but
	// where every full-size datagram vanishes the inner TCP resends at
	// its timeouts, 200 ms doubling, and the third sample of a black hole
	// comes back 1.6 s after it left.
	SampleWait = 4 * time.Second
	// SampleLosses is how many samples lost in a row make a black hole:
	// one or two lost to congestion or chance are not.
	SampleLosses = 3
	// SamplesPending bounds the samples awaiting a verdict: enough for
	// one every SampleEvery for SampleWait, so that none is ever pushed
	// out before its verdict.
	SamplesPending = 16
)

type dfSample struct {
	flow uint64 // hash of the flow's addresses and ports
	seq  uint32
	at   time.Time
}

var flowSeed = maphash.MakeSeed()

func flowHash(in *packet.Info) uint64 {
	var h maphash.Hash
	h.SetSeed(flowSeed)
	s, d := in.Src.As16(), in.Dst.As16()
	h.Write(s[:])
	h.Write(d[:])
	var p [4]byte
	binary.BigEndian.PutUint16(p[:], in.SrcPort)
	binary.BigEndian.PutUint16(p[2:], in.DstPort)
	h.Write(p[:])
	return h.Sum64()
}

// Due reports whether a sample may be taken now.
func (s *DFSamples) Due(now time.Time) bool { return !now.Before(s.next) }

// Take makes pkt, a full-size packet about to be sent, the next sample if
// it is a TCP segment with data and a sample is due; over IPv4 the caller
// then sends its datagram with DF set. A malformed packet is never taken.
func (s *DFSamples) Take(pkt []byte, now time.Time) bool {
	if !s.Due(now) {
		return false
	}
	in, err := packet.Parse(pkt)
	if err != nil || in.Proto != packet.ProtoTCP || len(in.Payload) == 0 {
		return false
	}
	if seq, ok := tcpSeq(pkt); !ok || seq != in.Seq {
		return false // a layout Seen's quick look cannot follow
	}
	flow := flowHash(&in)
	slot := -1
	for i := range s.pend {
		p := &s.pend[i]
		if p.at.IsZero() {
			if slot < 0 {
				slot = i
			}
			continue
		}
		if p.flow == flow && p.seq == in.Seq {
			return false // a resend of a sample is no new sample
		}
	}
	if slot < 0 {
		return false // all waiting: Expire frees them
	}
	s.pend[slot] = dfSample{flow: flow, seq: in.Seq, at: now}
	s.next = now.Add(SampleEvery)
	return true
}

// Pending reports whether a sample awaits its verdict: only then does
// Seen need the packets sent.
func (s *DFSamples) Pending() bool {
	for i := range s.pend {
		if !s.pend[i].at.IsZero() {
			return true
		}
	}
	return false
}

// Seen looks at a full-size packet sent to the peer: a sample's segment
// sent again means the sample was lost. It reports the loss that completes
// a black hole. A packet whose sequence number is
// no sample's costs a few loads and compares, so that a bulk transfer can
// be watched all along.
func (s *DFSamples) Seen(pkt []byte, now time.Time) bool {
	seq, ok := tcpSeq(pkt)
	if !ok {
		return false
	}
	hit := false
	for i := range s.pend {
		hit = hit || (s.pend[i].seq == seq && !s.pend[i].at.IsZero())
	}
	if !hit {
		return false
	}
	in, err := packet.Parse(pkt)
	if err != nil || in.Proto != packet.ProtoTCP || len(in.Payload) == 0 {
		return false
	}
	flow := flowHash(&in)
	for i := range s.pend {
		p := &s.pend[i]
		if p.at.IsZero() || p.flow != flow || p.seq != in.Seq {
			continue
		}
		if now.Sub(p.at) > SampleWait {
			return false // Expire's to judge
		}
		at := p.at
		*p = dfSample{}
		s.lost++
		if at.After(s.lastLost) {
			s.lastLost = at
		}
		if s.lost >= SampleLosses {
			s.Reset()
			return true
		}
	}
	return false
}

// Expire counts the samples not sent again within SampleWait as passed:
// each taken after the newest lost one ends a run of losses.
func (s *DFSamples) Expire(now time.Time) {
	for i := range s.pend {
		p := &s.pend[i]
		if p.at.IsZero() || now.Sub(p.at) <= SampleWait {
			continue
		}
		if p.at.After(s.lastLost) {
			s.lost = 0
		}
		*p = dfSample{}
	}
}

// Reset forgets every sample and count, as for a new path.
func (s *DFSamples) Reset() { *s = DFSamples{next: s.next} }

// tcpSeq reads the sequence number of a TCP segment in an IPv4 packet (an
// unfragmented one) or an IPv6 packet without extension headers, without
// validating the rest: Seen's quick look, confirmed by a full parse when
// it matches a sample.
func tcpSeq(pkt []byte) (uint32, bool) {
	if len(pkt) == 0 {
		return 0, false
	}
	off := 0
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) < 20 || pkt[9] != 6 || binary.BigEndian.Uint16(pkt[6:])&0x3fff != 0 {
			return 0, false
		}
		off = int(pkt[0]&0xf) * 4
	case 6:
		if len(pkt) < 40 || pkt[6] != 6 {
			return 0, false
		}
		off = 40
	default:
		return 0, false
	}
	if len(pkt) < off+8 {
		return 0, false
	}
	return binary.BigEndian.Uint32(pkt[off+4:]), true
}
