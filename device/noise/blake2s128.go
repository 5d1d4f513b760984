package noise

import (
	"encoding/binary"
	"math/bits"
)

// A keyed BLAKE2s with a 16-byte digest (RFC 7693), computed entirely on
// the stack. golang.org/x/crypto/blake2s can only be keyed through New128,
// which allocates a hash.Hash every time; MAC2 is keyed with a different
// cookie for every source, so checking it under a flood cost two
// allocations per message. MAC1, whose key never changes, keeps the
// pooled x/crypto hashers (macpool.go), which use its assembly.

var blake2sIV = [8]uint32{
	0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
	0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
}

// macStack is MAC(key, msg), keyed BLAKE2s-128, without allocating. key
// must be 1 to 32 bytes long (ours are 16 or 32); a longer one yields the
// zero MAC, which a constant-time compare never matches.
func macStack(key, msg []byte) (out [macSize]byte) {
	if len(key) == 0 || len(key) > 32 {
		return out
	}
	h := blake2sIV
	h[0] ^= 0x01010000 ^ uint32(len(key))<<8 ^ macSize
	// The key, zero-padded, is the first block; it is the last one too
	// only when the message is empty.
	var block [64]byte
	copy(block[:], key)
	t := uint64(64)
	blake2sCompress(&h, &block, t, len(msg) == 0)
	if len(msg) > 0 {
		for len(msg) > 64 {
			t += 64
			blake2sCompress(&h, (*[64]byte)(msg[:64]), t, false)
			msg = msg[64:]
		}
		block = [64]byte{}
		copy(block[:], msg)
		t += uint64(len(msg))
		blake2sCompress(&h, &block, t, true)
	}
	for i := range macSize / 4 {
		binary.LittleEndian.PutUint32(out[4*i:], h[i])
	}
	return out
}

// blake2sCompress is the compression function F: it mixes one block into
// h, with t the bytes hashed so far (this block included). The state lives
// in sixteen locals and G is small enough to inline, so the compiler keeps
// the rounds in registers (an array state with a schedule table ran 2.5
// times slower). The rounds are unrolled with the schedule of RFC 7693,
// section 2.7, written into the message indices.
func blake2sCompress(h *[8]uint32, b *[64]byte, t uint64, last bool) {
	var m [16]uint32
	for i := range m {
		m[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	v0, v1, v2, v3, v4, v5, v6, v7 := h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
	v8, v9, v10, v11 := blake2sIV[0], blake2sIV[1], blake2sIV[2], blake2sIV[3]
	v12, v13, v14, v15 := blake2sIV[4]^uint32(t), blake2sIV[5]^uint32(t>>32), blake2sIV[6], blake2sIV[7]
	if last {
		v14 = ^v14
	}
	// round 0
	v0, v4, v8, v12 = blake2sG(v0, v4, v8, v12, m[0], m[1])
	v1, v5, v9, v13 = blake2sG(v1, v5, v9, v13, m[2], m[3])
	v2, v6, v10, v14 = blake2sG(v2, v6, v10, v14, m[4], m[5])
	v3, v7, v11, v15 = blake2sG(v3, v7, v11, v15, m[6], m[7])
	v0, v5, v10, v15 = blake2sG(v0, v5, v10, v15, m[8], m[9])
	v1, v6, v11, v12 = blake2sG(v1, v6, v11, v12, m[10], m[11])
	v2, v7, v8, v13 = blake2sG(v2, v7, v8, v13, m[12], m[13])
	v3, v4, v9, v14 = blake2sG(v3, v4, v9, v14, m[14], m[15])
	// round 1
	v0, v4, v8, v12 = blake2sG(v0, v4, v8, v12, m[14], m[10])
	v1, v5, v9, v13 = blake2sG(v1, v5, v9, v13, m[4], m[8])
	v2, v6, v10, v14 = blake2sG(v2, v6, v10, v14, m[9], m[15])
	v3, v7, v11, v15 = blake2sG(v3, v7, v11, v15, m[13], m[6])
	v0, v5, v10, v15 = blake2sG(v0, v5, v10, v15, m[1], m[12])
	v1, v6, v11, v12 = blake2sG(v1, v6, v11, v12, m[0], m[2])
	v2, v7, v8, v13 = blake2sG(v2, v7, v8, v13, m[11], m[7])
	v3, v4, v9, v14 = blake2sG(v3, v4, v9, v14, m[5], m[3])
	// round 2
	v0, v4, v8, v12 = blake2sG(v0, v4, v8, v12, m[11], m[8])
	v1, v5, v9, v13 = blake2sG(v1, v5, v9, v13, m[12], m[0])
	v2, v6, v10, v14 = blake2sG(v2, v6, v10, v14, m[5], m[2])
	v3, v7, v11, v15 = blake2sG(v3, v7, v11, v15, m[15], m[13])
	v0, v5, v10, v15 = blake2sG(v0, v5, v10, v15, m[10], m[14])
	v1, v6, v11, v12 = blake2sG(v1, v6, v11, v12, m[3], m[6])
	v2, v7, v8, v13 = blake2sG(v2, v7, v8, v13, m[7], m[1])
	v3, v4, v9, v14 = blake2sG(v3, v4, v9, v14, m[9], m[4])
	// round 3
	v0, v4, v8, v12 = blake2sG(v0, v4, v8, v12, m[7], m[9])
	v1, v5, v9, v13 = blake2sG(v1, v5, v9, v13, m[3], m[1])
	v2, v6, v10, v14 = blake2sG(v2, v6, v10, v14, m[13], m[12])
	v3, v7, v11, v15 = blake2sG(v3, v7, v11, v15, m[11], m[14])
	v0, v5, v10, v15 = blake2sG(v0, v5, v10, v15, m[2], m[6])
	v1, v6, v11, v12 = blake2sG(v1, v6, v11, v12, m[5], m[10])
	v2, v7, v8, v13 = blake2sG(v2, v7, v8, v13, m[4], m[0])
	v3, v4, v9, v14 = blake2sG(v3, v4, v9, v14, m[15], m[8])
	// round 4
	v0, v4, v8, v12 = blake2sG(v0, v4, v8, v12, m[9], m[0])
	v1, v5, v9, v13 = blake2sG(v1, v5, v9, v13, m[5], m[7])
	v2, v6, v10, v14 = blake2sG(v2, v6, v10, v14, m[2], m[4])
	v3, v7, v11, v15 = blake2sG(v3, v7, v11, v15, m[10], m[15])
	v0, v5, v10, v15 = blake2sG(v0, v5, v10, v15, m[14], m[1])
	v1, v6, v11, v12 = blake2sG(v1, v6, v11, v12, m[11], m[12])
	v2, v7, v8, v13 = blake2sG(v2, v7, v8, v13, m[6], m[8])
	v3, v4, v9, v14 = blake2sG(v3, v4, v9, v14, m[3], m[13])
	// round 5
	v0, v4, v8, v12 = blake2sG(v0, v4, v8, v12, m[2], m[12])
	v1, v5, v9, v13 = blake2sG(v1, v5, v9, v13, m[6], m[10])
	v2, v6, v10, v14 = blake2sG(v2, v6, v10, v14, m[0], m[11])
	v3, v7, v11, v15 = blake2sG(v3, v7, v11, v15, m[8], m[3])
	v0, v5, v10, v15 = blake2sG(v0, v5, v10, v15, m[4], m[13])
	v1, v6, v11, v12 = blake2sG(v1, v6, v11, v12, m[7], m[5])
	v2, v7, v8, v13 = blake2sG(v2, v7, v8, v13, m[15], m[14])
	v3, v4, v9, v14 = blake2sG(v3, v4, v9, v14, m[1], m[9])
	// round 6
	v0, v4, v8, v12 = blake2sG(v0, v4, v8, v12, m[12], m[5])
	v1, v5, v9, v13 = blake2sG(v1, v5, v9, v13, m[1], m[15])
	v2, v6, v10, v14 = blake2sG(v2, v6, v10, v14, m[14], m[13])
	v3, v7, v11, v15 = blake2sG(v3, v7, v11, v15, m[4], m[10])
	v0, v5, v10, v15 = blake2sG(v0, v5, v10, v15, m[0], m[7])
	v1, v6, v11, v12 = blake2sG(v1, v6, v11, v12, m[6], m[3])
	v2, v7, v8, v13 = blake2sG(v2, v7, v8, v13, m[9], m[2])
	v3, v4, v9, v14 = blake2sG(v3, v4, v9, v14, m[8], m[11])
	// round 7
	v0, v4, v8, v12 = blake2sG(v0, v4, v8, v12, m[13], m[11])
	v1, v5, v9, v13 = blake2sG(v1, v5, v9, v13, m[7], m[14])
	v2, v6, v10, v14 = blake2sG(v2, v6, v10, v14, m[12], m[1])
	v3, v7, v11, v15 = blake2sG(v3, v7, v11, v15, m[3], m[9])
	v0, v5, v10, v15 = blake2sG(v0, v5, v10, v15, m[5], m[0])
	v1, v6, v11, v12 = blake2sG(v1, v6, v11, v12, m[15], m[4])
	v2, v7, v8, v13 = blake2sG(v2, v7, v8, v13, m[8], m[6])
	v3, v4, v9, v14 = blake2sG(v3, v4, v9, v14, m[2], m[10])
	// round 8
	v0, v4, v8, v12 = blake2sG(v0, v4, v8, v12, m[6], m[15])
	v1, v5, v9, v13 = blake2sG(v1, v5, v9, v13, m[14], m[9])
	v2, v6, v10, v14 = blake2sG(v2, v6, v10, v14, m[11], m[3])
	v3, v7, v11, v15 = blake2sG(v3, v7, v11, v15, m[0], m[8])
	v0, v5, v10, v15 = blake2sG(v0, v5, v10, v15, m[12], m[2])
	v1, v6, v11, v12 = blake2sG(v1, v6, v11, v12, m[13], m[7])
	v2, v7, v8, v13 = blake2sG(v2, v7, v8, v13, m[1], m[4])
	v3, v4, v9, v14 = blake2sG(v3, v4, v9, v14, m[10], m[5])
	// round 9
	v0, v4, v8, v12 = blake2sG(v0, v4, v8, v12, m[10], m[2])
	v1, v5, v9, v13 = blake2sG(v1, v5, v9, v13, m[8], m[4])
	v2, v6, v10, v14 = blake2sG(v2, v6, v10, v14, m[7], m[6])
	v3, v7, v11, v15 = blake2sG(v3, v7, v11, v15, m[1], m[5])
	v0, v5, v10, v15 = blake2sG(v0, v5, v10, v15, m[15], m[11])
	v1, v6, v11, v12 = blake2sG(v1, v6, v11, v12, m[9], m[14])
	v2, v7, v8, v13 = blake2sG(v2, v7, v8, v13, m[3], m[12])
	v3, v4, v9, v14 = blake2sG(v3, v4, v9, v14, m[13], m[0])
	h[0] ^= v0 ^ v8
	h[1] ^= v1 ^ v9
	h[2] ^= v2 ^ v10
	h[3] ^= v3 ^ v11
	h[4] ^= v4 ^ v12
	h[5] ^= v5 ^ v13
	h[6] ^= v6 ^ v14
	h[7] ^= v7 ^ v15
}

// blake2sG is the mixing function G on four words of the state.
func blake2sG(a, b, c, d, x, y uint32) (uint32, uint32, uint32, uint32) {
	a += b + x
	d = bits.RotateLeft32(d^a, -16)
	c += d
	b = bits.RotateLeft32(b^c, -12)
	a += b + y
	d = bits.RotateLeft32(d^a, -8)
	c += d
	b = bits.RotateLeft32(b^c, -7)
	return a, b, c, d
}
