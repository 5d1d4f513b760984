package aqm

import (
	"encoding/binary"

	"github.com/fips-go/fips-go/internal/packet"
)

// ECN codepoints, the low two bits of the IPv4 TOS / IPv6 traffic class
// (RFC 3168): Not-ECT, ECT(1), ECT(0), CE.
const (
	notECT = 0
	ce     = 3
)

// Mark gives pkt, an IPv4 or IPv6 packet, the congestion signal by ECN
// when its sender asked for ECN (ECT(0) or ECT(1)): it sets CE, keeping an
// IPv4 header checksum valid, and reports true. A packet already marked
// reports true unchanged. A packet that is not ECN-capable, or not a whole
// IP header, is left alone and reports false: the caller drops it instead.
func Mark(pkt []byte) bool {
	switch packet.Version(pkt) {
	case 4:
		if len(pkt) < packet.IPv4HeaderLen {
			return false
		}
		ip := packet.IPv4Header(pkt)
		tos := ip.TOS()
		switch tos & 3 {
		case notECT:
			return false
		case ce:
			return true
		}
		// Incremental checksum update (RFC 1624, eqn. 3) over the
		// 16-bit word holding version/IHL and TOS.
		old := binary.BigEndian.Uint16(pkt[0:2])
		pkt[1] = tos | ce
		updateChecksum(ip.Checksum(), old, binary.BigEndian.Uint16(pkt[0:2]))
		return true
	case 6:
		if len(pkt) < packet.IPv6HeaderLen {
			return false
		}
		switch packet.IPv6Header(pkt).TrafficClass() & 3 {
		case notECT:
			return false
		case ce:
			return true
		}
		// The traffic class straddles bytes 0 and 1; its ECN bits are
		// bits 4-5 of byte 1.
		pkt[1] |= ce << 4
		return true
	}
	return false
}

// updateChecksum rewrites the ones'-complement checksum at sum for one
// 16-bit word of the summed data changing from old to new:
// HC' = ~(~HC + ~m + m').
func updateChecksum(sum []byte, old, new uint16) {
	hc := uint32(^binary.BigEndian.Uint16(sum))
	hc += uint32(^old) + uint32(new)
	for hc>>16 != 0 {
		hc = hc&0xffff + hc>>16
	}
	binary.BigEndian.PutUint16(sum, ^uint16(hc))
}
