package pmtu

import (
	"encoding/binary"
	"time"

	"github.com/fips-go/fips-go/internal/packet"
)

// MSS is the TCP maximum segment size that keeps a segment of an inner
// packet of IP version ipVersion within innerMTU, 0 when innerMTU is 0.
// IPv6 gets no 1280-byte floor here: a link must carry 1280 bytes, but a
// TCP segment may be smaller, and over a path that carries less inside
// the tunnel (1280 outside leaves 1200) a smaller MSS is the only way the
// inner TCP avoids fragmented outer datagrams (its stack ignores a
// packet-too-big below 1280).
func MSS(innerMTU, ipVersion int) int {
	if innerMTU <= 0 {
		return 0
	}
	hdr := packet.IPv4HeaderLen + packet.TCPHeaderLen
	if ipVersion == 6 {
		hdr = packet.IPv6HeaderLen + packet.TCPHeaderLen
	}
	return max(innerMTU, MinInnerMTUv4) - hdr
}

// ClampMSS lowers the MSS option of pkt, when it is a TCP SYN (or SYN-ACK)
// announcing more than the MSS that innerMTU leaves (see MSS), to that
// MSS, fixing the TCP checksum incrementally (RFC 1624). It reports
// whether it changed pkt. Anything else, a malformed packet included, is
// left alone: the clamp never drops.
func ClampMSS(pkt []byte, innerMTU int) bool {
	if innerMTU <= 0 {
		return false
	}
	var tcp []byte
	switch packet.Version(pkt) {
	case 4:
		if len(pkt) < packet.IPv4HeaderLen {
			return false
		}
		h := packet.IPv4Header(pkt)
		ihl, total := h.HeaderLen(), h.TotalLen()
		if h.Protocol() != packet.ProtoTCP || h.FragOffset() != 0 || ihl < packet.IPv4HeaderLen || total > len(pkt) || ihl > total {
			return false
		}
		tcp = pkt[ihl:total]
	case 6:
		if len(pkt) < packet.IPv6HeaderLen {
			return false
		}
		h := packet.IPv6Header(pkt)
		end := packet.IPv6HeaderLen + h.PayloadLen()
		if h.NextHeader() != packet.ProtoTCP || end > len(pkt) {
			return false
		}
		tcp = pkt[packet.IPv6HeaderLen:end]
	default:
		return false
	}
	return clampTCP(tcp, MSS(innerMTU, packet.Version(pkt)))
}

// clampTCP clamps the MSS option of a TCP SYN segment to mss.
func clampTCP(tcp []byte, mss int) bool {
	if len(tcp) < packet.TCPHeaderLen {
		return false
	}
	h := packet.TCPHeader(tcp)
	off := h.HeaderLen()
	if h.Flags()&packet.TCPSyn == 0 || off < packet.TCPHeaderLen || off > len(tcp) {
		return false
	}
	opts := tcp[packet.TCPHeaderLen:off]
	for i := 0; i < len(opts); {
		switch kind := opts[i]; {
		case kind == 0: // end of options
			return false
		case kind == 1: // no-op
			i++
			continue
		case i+1 >= len(opts) || opts[i+1] < 2 || i+int(opts[i+1]) > len(opts):
			return false // malformed: leave it to the receiver
		case kind == 2 && opts[i+1] == 4:
			at := packet.TCPHeaderLen + i + 2
			old := binary.BigEndian.Uint16(tcp[at:])
			if int(old) <= mss {
				return false
			}
			binary.BigEndian.PutUint16(tcp[at:], uint16(mss))
			fixChecksum(h.Checksum(), at, old, uint16(mss))
			return true
		default:
			i += int(opts[i+1])
		}
	}
	return false
}

// fixChecksum updates a checksum field for a 16-bit word changed from old
// to new (RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m')). The word's offset
// does not matter when it is even, and the MSS option's value may sit at
// an odd offset after no-ops: then its bytes are swapped in the sum.
func fixChecksum(field []byte, at int, old, new uint16) {
	if at%2 == 1 {
		old, new = old<<8|old>>8, new<<8|new>>8
	}
	sum := uint32(^binary.BigEndian.Uint16(field)) + uint32(^old) + uint32(new)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(field, ^uint16(sum))
}

// Bucket is a token bucket: Rate tokens a second up to Burst. The zero
// value allows nothing; NewBucket fills it.
type Bucket struct {
	rate, burst float64
	tokens      float64
	last        time.Time
}

// NewBucket returns a full bucket.
func NewBucket(rate float64, burst int) Bucket {
	return Bucket{rate: rate, burst: float64(burst), tokens: float64(burst)}
}

// Allow takes a token at now, reporting whether there was one. Not safe
// for concurrent use.
func (b *Bucket) Allow(now time.Time) bool {
	if !b.last.IsZero() {
		if dt := now.Sub(b.last).Seconds(); dt > 0 {
			b.tokens = min(b.burst, b.tokens+dt*b.rate)
		}
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
