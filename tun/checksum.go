package tun

import (
	"encoding/binary"
	"math/bits"
)

// The checksum helpers sum little-endian 64-bit words with end-around
// carry. The one's complement sum does not depend on byte order except for
// a final swap (RFC 1071 section 2), so foldLE returns the sum in network
// order whatever the host's.

// sumLE adds b to acc. The bulk goes as 32-bit words into four 64-bit
// accumulators: they cannot overflow below 16 GiB, so there are no carries
// to chain, and the four sums run in parallel: faster than one chain of
// 64-bit add-with-carry, whose carry flag the Go compiler saves and
// restores on every iteration (BenchmarkSplitGSO; docs/benchmarks.md).
func sumLE(b []byte, acc uint64) uint64 { return sumLEWith(b, acc, haveAVX2) }

// sumLEWith is sumLE with the vector loop chosen by the caller (only
// where haveAVX2 allows it), so that tests compare both on one machine.
func sumLEWith(b []byte, acc uint64, avx2 bool) uint64 {
	var a0, a1, a2, a3 uint64
	if avx2 && len(b) >= avx2Min {
		n := len(b) &^ 31
		a0 = sumWords32(b[:n])
		b = b[n:]
	}
	for len(b) >= 64 {
		a0 += uint64(binary.LittleEndian.Uint32(b))
		a1 += uint64(binary.LittleEndian.Uint32(b[4:]))
		a2 += uint64(binary.LittleEndian.Uint32(b[8:]))
		a3 += uint64(binary.LittleEndian.Uint32(b[12:]))
		a0 += uint64(binary.LittleEndian.Uint32(b[16:]))
		a1 += uint64(binary.LittleEndian.Uint32(b[20:]))
		a2 += uint64(binary.LittleEndian.Uint32(b[24:]))
		a3 += uint64(binary.LittleEndian.Uint32(b[28:]))
		a0 += uint64(binary.LittleEndian.Uint32(b[32:]))
		a1 += uint64(binary.LittleEndian.Uint32(b[36:]))
		a2 += uint64(binary.LittleEndian.Uint32(b[40:]))
		a3 += uint64(binary.LittleEndian.Uint32(b[44:]))
		a0 += uint64(binary.LittleEndian.Uint32(b[48:]))
		a1 += uint64(binary.LittleEndian.Uint32(b[52:]))
		a2 += uint64(binary.LittleEndian.Uint32(b[56:]))
		a3 += uint64(binary.LittleEndian.Uint32(b[60:]))
		b = b[64:]
	}
	for len(b) >= 16 {
		a0 += uint64(binary.LittleEndian.Uint32(b))
		a1 += uint64(binary.LittleEndian.Uint32(b[4:]))
		a2 += uint64(binary.LittleEndian.Uint32(b[8:]))
		a3 += uint64(binary.LittleEndian.Uint32(b[12:]))
		b = b[16:]
	}
	acc, c := bits.Add64(acc, a0+a1+a2+a3, 0)
	for len(b) >= 8 {
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b), c)
		b = b[8:]
	}
	return sumTail(b, acc, c)
}

// avx2Min is the shortest sum worth the vector loop: below it the call
// and the register setup cost more than they save (a TCP ACK, a DNS query).
const avx2Min = 256

// copySumLE copies src into dst (which must be at least as long) and adds
// src to acc. Copying first and summing the copy, which is then in the
// cache, is faster than loading, storing and adding each word in one loop.
func copySumLE(dst, src []byte, acc uint64) uint64 {
	return sumLE(dst[:copy(dst, src)], acc)
}

// sumTail adds the last 0 to 7 bytes and the pending carry.
func sumTail(b []byte, acc, c uint64) uint64 {
	var w uint64
	for i, x := range b {
		w |= uint64(x) << (8 * i)
	}
	acc, c = bits.Add64(acc, w, c)
	acc, c = bits.Add64(acc, 0, c)
	return acc + c
}

// foldLE folds a sum of little-endian words to 16 bits in network order.
func foldLE(acc uint64) uint16 {
	s := acc>>32 + acc&0xffffffff
	s = s>>32 + s&0xffffffff
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	return bits.ReverseBytes16(uint16(s))
}

// addrSumLE sums the pseudo-header's addresses of an IPv4 or IPv6 packet
// (at least 20 or 40 bytes).
func addrSumLE(pkt []byte, v6 bool) uint64 {
	if v6 {
		return sumLE(pkt[8:40], 0)
	}
	return sumLE(pkt[12:20], 0)
}

// pseudoSumLE adds the protocol and transport length to addrSum, giving
// the pseudo-header's sum (RFC 768, RFC 793, RFC 8200 section 8.1).
func pseudoSumLE(addrSum uint64, proto uint8, length int) uint64 {
	w := uint64(bits.ReverseBytes16(uint16(proto))) + uint64(bits.ReverseBytes16(uint16(length)))
	s, c := bits.Add64(addrSum, w, 0)
	s, c = bits.Add64(s, 0, c) // end-around carry
	return s + c
}
