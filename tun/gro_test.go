package tun

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/fips-go/fips-go/internal/packet"
)

// kernelSplit does what the kernel does with a frame written to the TUN:
// a super-packet is cut into gso_size segments, each with the head's
// headers, its own lengths and sequence number, PSH only on the last. The
// checksums of the result are left for normalize to recompute.
func kernelSplit(t *testing.T, frame []byte) [][]byte {
	t.Helper()
	h, ok := parseVnetHdr(frame)
	if !ok {
		t.Fatalf("a %d-byte frame", len(frame))
	}
	pkt := frame[vnetHdrLen:]
	ecn := h.gsoType&vnetGSOECN != 0
	h.gsoType &^= vnetGSOECN
	if h.gsoType == vnetGSONone {
		if h.flags != vnetFlagDataValid {
			t.Fatalf("single packet written with flags %#x, want data-valid", h.flags)
		}
		return [][]byte{pkt}
	}
	if h.flags != vnetFlagNeedsCsum {
		t.Fatalf("super-packet flags %#x", h.flags)
	}
	checkSuper(t, h, pkt)
	hl, hdr := int(h.csumStart), int(h.hdrLen)
	payload := pkt[hdr:]
	var segs [][]byte
	for off := 0; off < len(payload); off += int(h.gsoSize) {
		end := min(off+int(h.gsoSize), len(payload))
		s := append(append([]byte(nil), pkt[:hdr]...), payload[off:end]...)
		if pkt[0]>>4 == 4 {
			binary.BigEndian.PutUint16(s[2:], uint16(len(s)))
		} else {
			binary.BigEndian.PutUint16(s[4:], uint16(len(s)-40))
		}
		if h.gsoType == vnetGSOUDPL4 {
			binary.BigEndian.PutUint16(s[hl+4:], uint16(len(s)-hl))
		} else {
			binary.BigEndian.PutUint32(s[hl+4:], binary.BigEndian.Uint32(pkt[hl+4:])+uint32(off))
			if end < len(payload) {
				s[hl+13] &^= tcpFlagPSH | tcpFlagFIN
			}
			if off > 0 && ecn {
				s[hl+13] &^= tcpFlagCWR
			}
		}
		segs = append(segs, s)
	}
	return segs
}

// checkSuper checks what the kernel relies on in a super-packet: the IP
// length and header checksum, and the pseudo-header sum at the checksum
// offset (CHECKSUM_PARTIAL).
func checkSuper(t *testing.T, h vnetHdr, pkt []byte) {
	t.Helper()
	hl := int(h.csumStart)
	var src, dst []byte
	if pkt[0]>>4 == 4 {
		if int(binary.BigEndian.Uint16(pkt[2:])) != len(pkt) || packet.Checksum(pkt[:20]) != 0 {
			t.Fatalf("IPv4 super-packet header: length %d of %d, checksum %#x", binary.BigEndian.Uint16(pkt[2:]), len(pkt), packet.Checksum(pkt[:20]))
		}
		src, dst = pkt[12:16], pkt[16:20]
	} else {
		if int(binary.BigEndian.Uint16(pkt[4:]))+40 != len(pkt) {
			t.Fatalf("IPv6 payload length %d of %d", binary.BigEndian.Uint16(pkt[4:]), len(pkt))
		}
		src, dst = pkt[8:24], pkt[24:40]
	}
	proto := uint8(protoTCP)
	if h.gsoType == vnetGSOUDPL4 {
		proto = protoUDP
		if int(binary.BigEndian.Uint16(pkt[hl+4:])) != len(pkt)-hl {
			t.Fatalf("UDP super-packet length field %d of %d", binary.BigEndian.Uint16(pkt[hl+4:]), len(pkt)-hl)
		}
	}
	want := pseudoRef(src, dst, proto, len(pkt)-hl)
	if got := binary.BigEndian.Uint16(pkt[hl+int(h.csumOffset):]); got != want {
		t.Fatalf("partial checksum %#x, want the pseudo-header sum %#x", got, want)
	}
	if int(h.hdrLen) > len(pkt) || h.gsoSize == 0 {
		t.Fatalf("virtio header %+v for a %d-byte packet", h, len(pkt))
	}
}

// pseudoRef is the folded pseudo-header sum by RFC 1071's definition
// (packet.Checksum), independent of the code under test.
func pseudoRef(src, dst []byte, proto uint8, length int) uint16 {
	return ^packet.Checksum(src, dst, []byte{0, proto}, []byte{byte(length >> 8), byte(length)})
}

// normalize zeroes what legitimately differs between a packet and the
// kernel's cut of the super-packet it joined: the IPv4 ID (the cut carries
// the head's) and the checksums, which it then recomputes.
func normalize(pkt []byte) []byte {
	p := append([]byte(nil), pkt...)
	g := parseGRO(p)
	if !g.hasKey {
		return p
	}
	hl := g.ipLen
	if !g.key.v6 {
		p[4], p[5], p[10], p[11] = 0, 0, 0, 0
	}
	off := hl + 16
	if g.key.proto == protoUDP {
		off = hl + 6
	}
	p[off], p[off+1] = 0, 0
	return p
}

// flowOfTest is the flow a packet belongs to for ordering, or "" for none.
func flowOfTest(pkt []byte) string {
	g := parseGRO(pkt)
	if !g.hasKey {
		return ""
	}
	return fmt.Sprint(g.key)
}

// checkPlan writes pkts through the planner as the writer does and checks
// that the kernel's cut of every write gives back exactly the packets, each
// once, every flow in order.
func checkPlan(t *testing.T, pkts [][]byte, udp bool) (writes int) {
	t.Helper()
	orig := make([][]byte, len(pkts))
	work := make([][]byte, len(pkts))
	for i, p := range pkts {
		orig[i] = append([]byte(nil), p...)
		work[i] = append([]byte(nil), p...)
	}
	var p groPlan
	p.udp = udp
	p.plan(work)
	seen := make([]bool, len(pkts))
	last := map[string]int{}
	for i := range work {
		if !p.head[i] {
			continue
		}
		writes++
		h := p.prepare(work, i)
		frame := make([]byte, vnetHdrLen, vnetHdrLen+65536)
		h.put(frame)
		frame = append(frame, work[i]...)
		chain := []int{i}
		for j := p.next[i]; j >= 0; j = p.next[j] {
			frame = append(frame, work[j][p.pkts[i].hdrLen:]...)
			chain = append(chain, int(j))
		}
		segs := kernelSplit(t, frame)
		if len(segs) != len(chain) {
			t.Fatalf("write at %d: %d packets joined, the kernel would cut %d", i, len(chain), len(segs))
		}
		for k, j := range chain {
			if seen[j] {
				t.Fatalf("packet %d written twice", j)
			}
			seen[j] = true
			if got, want := normalize(segs[k]), normalize(orig[j]); !bytes.Equal(got, want) {
				t.Fatalf("packet %d (segment %d of the write at %d) differs after the kernel's cut:\n got %x\nwant %x", j, k, i, got, want)
			}
			if f := flowOfTest(orig[j]); f != "" {
				if prev, ok := last[f]; ok && prev > j {
					t.Fatalf("packet %d of a flow written after its packet %d", prev, j)
				}
				last[f] = j
			}
		}
	}
	for j, ok := range seen {
		if !ok {
			t.Fatalf("packet %d never written", j)
		}
	}
	return writes
}

var (
	a4 = netip.MustParseAddrPort("10.0.0.1:5000")
	b4 = netip.MustParseAddrPort("10.0.0.2:80")
	a6 = netip.MustParseAddrPort("[fd00::1]:5000")
	b6 = netip.MustParseAddrPort("[fd00::2]:443")
)

func tcpSeg(t testing.TB, src, dst netip.AddrPort, seq uint32, flags uint8, n int) []byte {
	p, err := packet.TCP(packet.TCPSegment{Src: src, Dst: dst, Seq: seq, Ack: 7, Flags: flags, Window: 500, Payload: bytes.Repeat([]byte{byte(seq)}, n)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestGROPlanCoalescesABulkFlow(t *testing.T) {
	for _, ep := range [][2]netip.AddrPort{{a4, b4}, {a6, b6}} {
		var pkts [][]byte
		seq := uint32(1000)
		for i := range 40 {
			flags := uint8(tcpFlagACK)
			if i == 39 {
				flags |= tcpFlagPSH
			}
			pkts = append(pkts, tcpSeg(t, ep[0], ep[1], seq, flags, 1380))
			seq += 1380
		}
		// 40 x 1380 bytes fit in one 64 KiB super-packet.
		if w := checkPlan(t, pkts, false); w != 1 {
			t.Fatalf("%v: %d writes for one bulk run, want 1", ep[0].Addr(), w)
		}
	}
}

func TestGROPlanKeepsFlowsApartAndInOrder(t *testing.T) {
	var pkts [][]byte
	s1, s2 := uint32(1), uint32(1<<31)
	for i := range 30 {
		pkts = append(pkts, tcpSeg(t, a4, b4, s1, tcpFlagACK, 1000))
		s1 += 1000
		if i%3 == 0 {
			// A pure ACK of the same flow must end its super-packet.
			pkts = append(pkts, tcpSeg(t, a4, b4, s1, tcpFlagACK, 0))
		}
		pkts = append(pkts, tcpSeg(t, a6, b6, s2, tcpFlagACK, 700))
		s2 += 700
	}
	u, err := packet.UDP(a4, b4, make([]byte, 500))
	if err != nil {
		t.Fatal(err)
	}
	pkts = append(pkts, u, u, u)
	checkPlan(t, pkts, true)
	if w := checkPlan(t, pkts, false); w < 3 {
		t.Fatalf("%d writes", w)
	}
}

func TestGROPlanDoesNotMerge(t *testing.T) {
	base := tcpSeg(t, a4, b4, 100, tcpFlagACK, 100)
	for name, mutate := range map[string]func(p []byte){
		"sequence gap":   func(p []byte) { binary.BigEndian.PutUint32(p[24:], 999) },
		"other ack":      func(p []byte) { p[31]++ },
		"other window":   func(p []byte) { p[35]++ },
		"CE mark":        func(p []byte) { p[1] |= 3 },
		"other TTL":      func(p []byte) { p[8]-- },
		"FIN":            func(p []byte) { p[33] |= tcpFlagFIN },
		"bigger segment": nil,
	} {
		second := tcpSeg(t, a4, b4, 200, tcpFlagACK, 100)
		if mutate == nil {
			second = tcpSeg(t, a4, b4, 200, tcpFlagACK, 101)
		} else {
			mutate(second)
		}
		if w := checkPlan(t, [][]byte{base, second}, true); w != 2 {
			t.Errorf("%s: merged", name)
		}
	}
}

// FuzzGROPlan builds batches of random packets from a few flows, mostly in
// sequence, with the odd gap, flag, mark, option, fragment, other protocol
// and truncated header, and checks the kernel's cut of every write against
// the packets (checkPlan).
func FuzzGROPlan(f *testing.F) {
	for i := range 16 {
		f.Add(uint64(i), uint8(128), i%2 == 0)
	}
	f.Fuzz(func(t *testing.T, seed uint64, n uint8, udp bool) {
		checkPlan(t, randomBatch(t, rand.New(rand.NewPCG(seed, 7)), int(n)), udp)
	})
}

type fuzzFlow struct {
	src, dst netip.AddrPort
	udp      bool
	seq      uint32
	mss      int
}

func randomBatch(t *testing.T, r *rand.Rand, n int) [][]byte {
	eps := [][2]netip.AddrPort{{a4, b4}, {b4, a4}, {a6, b6}, {b6, a6}}
	var flows []fuzzFlow
	for range 1 + r.IntN(5) {
		e := eps[r.IntN(len(eps))]
		flows = append(flows, fuzzFlow{src: e[0], dst: e[1], udp: r.IntN(3) == 0, seq: r.Uint32(), mss: 1 + r.IntN(1400)})
	}
	var pkts [][]byte
	for range n {
		fl := &flows[r.IntN(len(flows))]
		size := fl.mss
		if r.IntN(8) == 0 {
			size = r.IntN(fl.mss + 2)
		}
		var p []byte
		if fl.udp {
			var err error
			if p, err = packet.UDP(fl.src, fl.dst, make([]byte, size)); err != nil {
				t.Fatal(err)
			}
		} else {
			flags := uint8(tcpFlagACK)
			switch r.IntN(20) {
			case 0:
				flags |= tcpFlagPSH
			case 1:
				flags |= tcpFlagFIN
			case 2:
				fl.seq += uint32(r.IntN(3000)) // a gap
			}
			s := packet.TCPSegment{Src: fl.src, Dst: fl.dst, Seq: fl.seq, Ack: 1, Flags: flags, Window: 100, IPID: uint16(r.Uint32()), Payload: make([]byte, size)}
			if r.IntN(4) == 0 {
				s.Options = []byte{1, 1, 8, 10, 0, 0, 0, byte(r.IntN(2)), 0, 0, 0, 0}
			}
			for i := range s.Payload {
				s.Payload[i] = byte(r.Uint32())
			}
			var err error
			if p, err = packet.TCP(s); err != nil {
				t.Fatal(err)
			}
			fl.seq += uint32(size)
		}
		switch r.IntN(40) {
		case 0:
			p[1] |= 3 // CE
		case 1:
			if p[0]>>4 == 4 {
				p[6] |= 0x20 // a fragment
			}
		case 2:
			p = p[:r.IntN(len(p))] // truncated: length fields lie
		case 3:
			p, _ = packet.ICMPEcho(fl.src.Addr(), fl.dst.Addr(), false, 1, uint16(r.Uint32()), nil)
		}
		pkts = append(pkts, p)
	}
	return pkts
}

func BenchmarkGROPlan(b *testing.B) {
	var pkts [][]byte
	seq := uint32(0)
	for range 128 {
		pkts = append(pkts, tcpSeg(b, a4, b4, seq, tcpFlagACK, 1380))
		seq += 1380
	}
	var p groPlan
	b.ReportAllocs()
	b.SetBytes(128 * 1420)
	for b.Loop() {
		p.plan(pkts)
		for i := range pkts {
			if p.head[i] {
				p.prepare(pkts, i)
			}
		}
	}
}
