package allowedips

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

func ipv4Packet(src, dst string) []byte {
	pkt := make([]byte, 28)
	pkt[0] = 0x45
	s, d := addr(src).As4(), addr(dst).As4()
	copy(pkt[12:], s[:])
	copy(pkt[16:], d[:])
	return pkt
}

func ipv6Packet(src, dst string) []byte {
	pkt := make([]byte, 48)
	pkt[0] = 0x60
	s, d := addr(src).As16(), addr(dst).As16()
	copy(pkt[8:], s[:])
	copy(pkt[24:], d[:])
	return pkt
}

func TestLookupPacket(t *testing.T) {
	var tb Table[int]
	must(t, tb.Insert(pfx("10.0.0.0/24"), 1))
	must(t, tb.Insert(pfx("10.0.1.0/24"), 2))
	must(t, tb.Insert(pfx("fd00::/64"), 3))
	must(t, tb.Insert(pfx("fd00:0:0:1::/64"), 4))

	check := func(name string, got int, ok bool, want int, wantOK bool) {
		t.Helper()
		if got != want || ok != wantOK {
			t.Errorf("%s = %d, %v; want %d, %v", name, got, ok, want, wantOK)
		}
	}
	p4 := ipv4Packet("10.0.0.5", "10.0.1.5")
	v, ok := tb.LookupPacketSrc(p4)
	check("v4 src", v, ok, 1, true)
	v, ok = tb.LookupPacketDst(p4)
	check("v4 dst", v, ok, 2, true)
	p6 := ipv6Packet("fd00::5", "fd00:0:0:1::5")
	v, ok = tb.LookupPacketSrc(p6)
	check("v6 src", v, ok, 3, true)
	v, ok = tb.LookupPacketDst(p6)
	check("v6 dst", v, ok, 4, true)

	// Exactly a bare header is enough; one byte less is not.
	v, ok = tb.LookupPacketDst(p4[:20])
	check("v4 bare header", v, ok, 2, true)
	v, ok = tb.LookupPacketDst(p6[:40])
	check("v6 bare header", v, ok, 4, true)
	for _, bad := range [][]byte{nil, {}, p4[:19], p6[:39], {0x45}, {0x60, 0, 0}} {
		if _, ok := tb.LookupPacketDst(bad); ok {
			t.Errorf("short packet of %d bytes matched", len(bad))
		}
		if _, ok := tb.LookupPacketSrc(bad); ok {
			t.Errorf("short packet of %d bytes matched as source", len(bad))
		}
	}
	// Any other version nibble is garbage, even with a matching address.
	for _, version := range []byte{0, 1, 5, 7, 15} {
		g := append([]byte(nil), p6...)
		g[0] = version << 4
		if _, ok := tb.LookupPacketDst(g); ok {
			t.Errorf("version %d packet matched", version)
		}
	}
	// An IPv4 header's address must not be read as IPv6 or vice versa.
	g := append([]byte(nil), p4...)
	g = append(g, make([]byte, 40)...)
	g[0] = 0x65
	if _, ok := tb.LookupPacketDst(g); ok {
		t.Error("IPv4 addresses looked up in the IPv6 trie")
	}
}

func TestLookupAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var tb Table[*int]
	owners := make([]*int, 100)
	for i := range owners {
		owners[i] = new(int)
	}
	for i := range 10000 {
		must(t, tb.Insert(randPrefix(rng, i%2 == 0), owners[i%len(owners)]))
	}
	a4, a6 := addr("10.0.3.4"), addr("fd00::1")
	p4, p6 := ipv4Packet("10.0.0.1", "10.0.3.4"), ipv6Packet("fd00::2", "fd00::1")
	allocs := testing.AllocsPerRun(1000, func() {
		tb.Lookup(a4)
		tb.Lookup(a6)
		tb.LookupPacketDst(p4)
		tb.LookupPacketSrc(p6)
	})
	if allocs != 0 {
		t.Fatalf("lookups allocate %v times per run", allocs)
	}
}

// FuzzTable drives random inserts, removals and lookups against the
// brute-force model and checks the trie's shape after every operation. A
// small address space makes prefixes collide, nest and move often.
func FuzzTable(f *testing.F) {
	f.Add([]byte{0, 10, 8, 1, 0, 10, 16, 2, 3, 10, 0, 0, 1, 10, 8, 1, 2, 0, 0, 2})
	f.Add([]byte{4, 0xfd, 64, 1, 4, 0xfd, 128, 2, 7, 0xfd, 100, 0, 5, 0xfd, 64, 1, 6, 0, 0, 1})
	f.Add([]byte{0, 0, 0, 1, 4, 0, 0, 1, 3, 0, 0, 0, 7, 0, 0, 0, 2, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		var tb Table[int]
		ref := refTable{}
		for i := 0; i+4 <= len(data) && i < 4*300; i += 4 {
			fuzzOp(t, &tb, ref, data[i:i+4])
			checkInvariants(t, &tb)
			if tb.Len() != len(ref) {
				t.Fatalf("Len = %d, model %d", tb.Len(), len(ref))
			}
		}
		for o := range 4 {
			if got, want := tb.Prefixes(o), ref.prefixes(o); !slices.Equal(got, want) {
				t.Fatalf("Prefixes(%d) = %v, model %v", o, got, want)
			}
		}
	})
}

// fuzzAddr spreads one byte over a few address bits in interesting
// positions: the first octet, the middle and the last octet.
func fuzzAddr(v6 bool, b byte) netip.Addr {
	if !v6 {
		return netip.AddrFrom4([4]byte{b & 0xf0, 0, b & 0x0c, b & 0x03})
	}
	var a [16]byte
	a[0], a[7], a[15] = b&0xf0, b&0x0c, b&0x03
	return netip.AddrFrom16(a)
}

func fuzzOp(t *testing.T, tb *Table[int], ref refTable, op []byte) {
	t.Helper()
	v6 := op[0]&4 != 0
	a := fuzzAddr(v6, op[1])
	p := netip.PrefixFrom(a, int(op[2])%(a.BitLen()+1)).Masked()
	owner := int(op[3]) % 4
	switch op[0] & 3 {
	case 0, 1:
		must(t, tb.Insert(p, owner))
		ref[p] = owner
	case 2:
		want := ref[p] == owner
		if _, ok := ref[p]; !ok {
			want = false
		}
		if got := tb.Remove(p, owner); got != want {
			t.Fatalf("Remove(%v, %d) = %v, model %v", p, owner, got, want)
		}
		if want {
			delete(ref, p)
		}
	case 3:
		if op[0]&8 != 0 {
			tb.RemoveAll(owner)
			for q, o := range ref {
				if o == owner {
					delete(ref, q)
				}
			}
		}
	}
	fuzzLookup(t, tb, ref, a)
	fuzzLookup(t, tb, ref, fuzzAddr(v6, op[3]))
}

func fuzzLookup(t *testing.T, tb *Table[int], ref refTable, a netip.Addr) {
	t.Helper()
	got, ok := tb.Lookup(a)
	want, wantOK := ref.lookup(a)
	if ok != wantOK || got != want {
		t.Fatalf("Lookup(%v) = %d, %v; model %d, %v", a, got, ok, want, wantOK)
	}
}
