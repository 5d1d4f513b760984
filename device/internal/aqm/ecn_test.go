package aqm

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

func ipv4Checksum(h []byte) uint16 {
	var s uint32
	for i := 0; i < len(h); i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

func ipv4(tos byte, r *rand.Rand) []byte {
	h := make([]byte, 20)
	for i := range h {
		h[i] = byte(r.Uint32())
	}
	h[0], h[1] = 0x45, tos
	h[10], h[11] = 0, 0
	binary.BigEndian.PutUint16(h[10:], ipv4Checksum(h))
	return h
}

// CE is set only on ECT packets, and the IPv4 header checksum stays valid
// whatever else the header holds.
func TestMarkIPv4(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 10000 {
		tos := byte(r.Uint32())
		h := ipv4(tos, r)
		orig := append([]byte(nil), h...)
		got := Mark(h)
		switch tos & 3 {
		case 0:
			if got || string(h) != string(orig) {
				t.Fatalf("case %d: Not-ECT packet marked or changed", i)
			}
		case 3:
			if !got || string(h) != string(orig) {
				t.Fatalf("case %d: CE packet not reported or changed", i)
			}
		default:
			if !got || h[1] != tos|3 {
				t.Fatalf("case %d: ECT tos %#x became %#x (%v)", i, tos, h[1], got)
			}
			if ipv4Checksum(h) != 0 {
				t.Fatalf("case %d: checksum invalid after marking %x", i, h)
			}
			h[1] = tos
			copy(h[10:12], orig[10:12])
			if string(h) != string(orig) {
				t.Fatalf("case %d: marking changed more than TOS and checksum", i)
			}
		}
	}
}

func TestMarkIPv6(t *testing.T) {
	for tc := range 4 {
		h := make([]byte, 40)
		h[0] = 0x6a            // version 6, traffic class high nibble 0xa
		h[1] = byte(tc)<<4 | 5 // ECN bits, flow label nibble 5
		got := Mark(h)
		wantMarked := tc != 0
		if got != wantMarked {
			t.Fatalf("ecn %d: Mark = %v", tc, got)
		}
		want := byte(tc)<<4 | 5
		if wantMarked {
			want = 3<<4 | 5
		}
		if h[1] != want || h[0] != 0x6a {
			t.Fatalf("ecn %d: header %x %x", tc, h[0], h[1])
		}
	}
}

func TestMarkShortOrOther(t *testing.T) {
	for _, p := range [][]byte{nil, {0x45, 2}, make([]byte, 39), {0x16, 2, 0, 0}} {
		if len(p) > 1 && p[0]>>4 == 6 {
			p[0] = 0x60
		}
		if Mark(p) {
			t.Fatalf("marked %x", p)
		}
	}
}

func FuzzMark(f *testing.F) {
	f.Add([]byte{0x45, 0x02, 0, 20, 0, 0, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2})
	f.Fuzz(func(t *testing.T, p []byte) {
		cp := append([]byte(nil), p...)
		if !Mark(p) && string(p) != string(cp) {
			t.Fatal("an unmarked packet changed")
		}
	})
}
