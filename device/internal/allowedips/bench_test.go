package allowedips

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

type benchPeer struct{ id int }

// uniformPrefix is a prefix of random bits: the shape of a large VPN where
// each peer owns addresses spread over the space.
func uniformPrefix(rng *rand.Rand, v6 bool) netip.Prefix {
	if !v6 {
		a := rng.Uint32()
		b := [4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}
		return netip.PrefixFrom(netip.AddrFrom4(b), 8+rng.IntN(25)).Masked()
	}
	var b [16]byte
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return netip.PrefixFrom(netip.AddrFrom16(b), 32+rng.IntN(97)).Masked()
}

// benchTable holds 10,000 random prefixes of one family and addresses to
// look up, half inside stored prefixes and half random.
func benchTable(v6 bool) (*Table[*benchPeer], []netip.Addr) {
	rng := rand.New(rand.NewPCG(11, 12))
	var tb Table[*benchPeer]
	addrs := make([]netip.Addr, 0, 1024)
	for i := range 10000 {
		p := uniformPrefix(rng, v6)
		if err := tb.Insert(p, &benchPeer{id: i}); err != nil {
			panic(err)
		}
		if len(addrs) < cap(addrs) && i%2 == 0 {
			addrs = append(addrs, randAddrNear(rng, p))
		} else if len(addrs) < cap(addrs) {
			addrs = append(addrs, uniformPrefix(rng, v6).Addr())
		}
	}
	return &tb, addrs
}

func benchLookup(b *testing.B, v6 bool) {
	tb, addrs := benchTable(v6)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		tb.Lookup(addrs[i&(len(addrs)-1)])
	}
}

func BenchmarkLookupV4(b *testing.B) { benchLookup(b, false) }
func BenchmarkLookupV6(b *testing.B) { benchLookup(b, true) }

func BenchmarkLookupPacketDst(b *testing.B) {
	tb, addrs := benchTable(false)
	pkts := make([][]byte, len(addrs))
	for i, a := range addrs {
		pkts[i] = ipv4Packet("192.0.2.1", a.String())
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		tb.LookupPacketDst(pkts[i&(len(pkts)-1)])
	}
}

// BenchmarkInsert10k loads 10,000 peers with an IPv4 /32 and an IPv6 /128
// each, the usual shape of a large configuration; one op is the whole load.
func BenchmarkInsert10k(b *testing.B) {
	peers := make([]*benchPeer, 10000)
	v4 := make([]netip.Prefix, len(peers))
	v6 := make([]netip.Prefix, len(peers))
	for i := range peers {
		peers[i] = &benchPeer{id: i}
		v4[i] = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
		v6[i] = netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 13: byte(i >> 16), byte(i >> 8), byte(i)}), 128)
	}
	b.ReportAllocs()
	for range b.N {
		var tb Table[*benchPeer]
		for i, p := range peers {
			_ = tb.Insert(v4[i], p)
			_ = tb.Insert(v6[i], p)
		}
	}
}

// BenchmarkRemoveAll10k removes 10,000 peers of 2 prefixes each.
func BenchmarkRemoveAll10k(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	peers := make([]*benchPeer, 10000)
	prefixes := make([]netip.Prefix, 2*len(peers))
	for i := range peers {
		peers[i] = &benchPeer{id: i}
		prefixes[2*i] = uniformPrefix(rng, false)
		prefixes[2*i+1] = uniformPrefix(rng, true)
	}
	b.ReportAllocs()
	for range b.N {
		b.StopTimer()
		var tb Table[*benchPeer]
		for i, p := range prefixes {
			_ = tb.Insert(p, peers[i/2])
		}
		b.StartTimer()
		for _, p := range peers {
			tb.RemoveAll(p)
		}
		if tb.Len() != 0 {
			b.Fatal("table not empty")
		}
	}
}
