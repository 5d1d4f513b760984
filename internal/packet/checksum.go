// Package packet is the one place that knows the layout of IPv4, IPv6,
// TCP, UDP and ICMP headers: zero-cost header views for the data path
// (device and tun), and a checked parser, builders and checksums for them
// and their tests. It is a leaf that imports nothing of ours, and
// deliberately independent of gVisor so that tests can use it to check
// what gVisor and our segmenter produce.
package packet

import "encoding/binary"

// sum adds b to the running one's complement sum acc (not yet folded) as a
// sequence of big-endian 16-bit words; an odd trailing byte is padded with
// zero, so only the last chunk of a message may have odd length. It works on
// 8 bytes at a time because the verifier runs over every byte of a 64 MiB
// test transfer.
func sum(acc uint64, b []byte) uint64 {
	for len(b) >= 32 {
		acc += uint64(binary.BigEndian.Uint32(b[0:])) + uint64(binary.BigEndian.Uint32(b[4:])) +
			uint64(binary.BigEndian.Uint32(b[8:])) + uint64(binary.BigEndian.Uint32(b[12:])) +
			uint64(binary.BigEndian.Uint32(b[16:])) + uint64(binary.BigEndian.Uint32(b[20:])) +
			uint64(binary.BigEndian.Uint32(b[24:])) + uint64(binary.BigEndian.Uint32(b[28:]))
		b = b[32:]
	}
	for len(b) >= 4 {
		acc += uint64(binary.BigEndian.Uint32(b))
		b = b[4:]
	}
	if len(b) >= 2 {
		acc += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint64(b[0]) << 8
	}
	return acc
}

// fold reduces a running sum to 16 bits with end-around carry.
func fold(acc uint64) uint16 {
	for acc>>16 != 0 {
		acc = (acc & 0xffff) + acc>>16
	}
	return uint16(acc)
}

// Checksum is the Internet checksum (RFC 1071) of the concatenation of
// parts: the value to store in a header whose checksum field was zero while
// summing. Every part but the last must have even length.
func Checksum(parts ...[]byte) uint16 {
	var acc uint64
	for _, p := range parts {
		acc = sum(acc, p)
	}
	return ^fold(acc)
}

// pseudoHeader returns the pseudo-header bytes TCP, UDP and ICMPv6
// checksums cover (RFC 793, RFC 768, RFC 8200 section 8.1).
func pseudoHeader(src, dst []byte, proto uint8, length int) []byte {
	if len(src) == 4 {
		ph := make([]byte, 12)
		copy(ph, src)
		copy(ph[4:], dst)
		ph[9] = proto
		binary.BigEndian.PutUint16(ph[10:], uint16(length))
		return ph
	}
	ph := make([]byte, 40)
	copy(ph, src)
	copy(ph[16:], dst)
	binary.BigEndian.PutUint32(ph[32:], uint32(length))
	ph[39] = proto
	return ph
}
