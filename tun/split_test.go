package tun

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/fips-go/fips-go/internal/packet"
)

func TestChecksumHelpersMatchRFC1071(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, r.IntN(3000))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if r.IntN(4) == 0 {
			for i := range b {
				b[i] = 0xff // carries everywhere
			}
		}
		want := ^packet.Checksum(b) // the folded sum
		if got := foldLE(sumLE(b, 0)); got != want {
			t.Fatalf("sumLE over %d bytes: %#x, want %#x", len(b), got, want)
		}
		dst := make([]byte, len(b)+5)
		if got := foldLE(copySumLE(dst, b, 0)); got != want || !bytes.Equal(dst[:len(b)], b) {
			t.Fatalf("copySumLE over %d bytes: %#x, want %#x (copy ok: %v)", len(b), got, want, bytes.Equal(dst[:len(b)], b))
		}
	}
}

// superFrame builds what the kernel TUN hands over for a TCP or UDP
// super-packet: a virtio-net header and the packet with the pseudo-header
// sum in its checksum field.
func superFrame(t testing.TB, r *rand.Rand) (frame []byte, gso int) {
	src, dst := a4, b4
	if r.IntN(2) == 0 {
		src, dst = a6, b6
	}
	payload := make([]byte, 1+r.IntN(64000))
	for i := range payload {
		payload[i] = byte(r.Uint32())
	}
	gso = 1 + r.IntN(1500)
	var pkt []byte
	var err error
	h := vnetHdr{flags: vnetFlagNeedsCsum, gsoSize: uint16(gso)}
	if r.IntN(3) == 0 {
		pkt, err = packet.UDP(src, dst, payload)
		h.gsoType, h.csumOffset = vnetGSOUDPL4, 6
	} else {
		flags := uint8(tcpFlagACK) | []uint8{0, tcpFlagPSH, tcpFlagFIN, tcpFlagCWR}[r.IntN(4)]
		s := packet.TCPSegment{Src: src, Dst: dst, Seq: r.Uint32(), Ack: r.Uint32(), Flags: flags, Window: 999, IPID: uint16(r.Uint32()), Payload: payload}
		if r.IntN(2) == 0 {
			s.Options = []byte{1, 1, 8, 10, 1, 2, 3, 4, 5, 6, 7, 8}
		}
		pkt, err = packet.TCP(s)
		h.gsoType, h.csumOffset = vnetGSOTCPv4, 16
		if src.Addr().Is6() {
			h.gsoType = vnetGSOTCPv6
		}
		if flags&tcpFlagCWR != 0 {
			h.gsoType |= vnetGSOECN
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	g := parseGRO(pkt)
	h.csumStart, h.hdrLen = uint16(g.ipLen), uint16(g.hdrLen)
	// The kernel leaves the pseudo-header sum where the checksum goes.
	sa, da := pkt[12:16], pkt[16:20]
	if g.key.v6 {
		sa, da = pkt[8:24], pkt[24:40]
	}
	at := g.ipLen + int(h.csumOffset)
	binary.BigEndian.PutUint16(pkt[at:], pseudoRef(sa, da, g.key.proto, len(pkt)-g.ipLen))
	frame = make([]byte, vnetHdrLen, vnetHdrLen+len(pkt))
	h.put(frame)
	return append(frame, pkt...), gso
}

// checkSplit splits frame with batches of perRead buffers, resuming as the
// reader does, and checks every segment: valid checksums, the same bytes
// as the kernel's own segmentation (kernelSplit) but for the IPv4 ID,
// which counts up from the super-packet's.
func checkSplit(t *testing.T, frame []byte, perRead int) {
	t.Helper()
	want := kernelSplit(t, append([]byte(nil), frame...))
	out := make([][]byte, perRead)
	for i := range out {
		out[i] = make([]byte, Headroom+1600)
	}
	sizes := make([]int, perRead)
	var got [][]byte
	for from := 0; ; {
		n, next, err := splitRead(frame, out, sizes, Headroom, from)
		if err != nil {
			t.Fatalf("split from %d: %v", from, err)
		}
		for i := range n {
			got = append(got, append([]byte(nil), out[i][Headroom:Headroom+sizes[i]]...))
		}
		if next == 0 {
			break
		}
		from = next
	}
	if len(got) != len(want) {
		t.Fatalf("%d segments, the kernel makes %d", len(got), len(want))
	}
	id := binary.BigEndian.Uint16(frame[vnetHdrLen+4:])
	for i := range got {
		if err := packet.Verify(got[i]); err != nil {
			t.Fatalf("segment %d of %d: %v", i, len(got), err)
		}
		if got[i][0]>>4 == 4 && binary.BigEndian.Uint16(got[i][4:]) != id+uint16(i) {
			t.Fatalf("segment %d: IPv4 ID %d, want %d", i, binary.BigEndian.Uint16(got[i][4:]), id+uint16(i))
		}
		if !bytes.Equal(normalize(got[i]), normalize(want[i])) {
			t.Fatalf("segment %d of %d differs from the kernel's:\n got %x\nwant %x", i, len(got), got[i], want[i])
		}
	}
}

func TestSplitGSO(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		frame, _ := superFrame(t, r)
		checkSplit(t, frame, 1+r.IntN(128))
	}
}

// FuzzSplitGSO: random super-packets, split in random batch sizes, match
// the kernel's segmentation; and any frame at all is split or refused
// without a panic.
func FuzzSplitGSO(f *testing.F) {
	for i := range 8 {
		f.Add(uint64(i), uint8(128), []byte{})
	}
	f.Add(uint64(0), uint8(3), []byte{0, 1, 40, 0, 100, 0, 20, 0, 16, 0, 0x45})
	f.Fuzz(func(t *testing.T, seed uint64, perRead uint8, raw []byte) {
		if perRead == 0 {
			perRead = 1
		}
		out := make([][]byte, perRead)
		for i := range out {
			out[i] = make([]byte, Headroom+1500)
		}
		sizes := make([]int, perRead)
		for from := 0; from < 1000; {
			_, next, err := splitRead(raw, out, sizes, Headroom, from)
			if err != nil || next == 0 {
				break
			}
			from = next
		}
		frame, _ := superFrame(t, rand.New(rand.NewPCG(seed, 5)))
		checkSplit(t, frame, int(perRead))
	})
}

func BenchmarkSplitGSO(b *testing.B) {
	frame, _ := superFrame(b, rand.New(rand.NewPCG(9, 9)))
	// a 64 KiB TCP super-packet cut at 1380 bytes, as a bulk flow reads
	h, _ := parseVnetHdr(frame)
	h.gsoSize = 1380
	h.put(frame)
	out := make([][]byte, 128)
	for i := range out {
		out[i] = make([]byte, Headroom+1500)
	}
	sizes := make([]int, 128)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := splitRead(frame, out, sizes, Headroom, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSplitNoneFinishesChecksum(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		frame, _ := superFrame(t, r)
		pkt := frame[vnetHdrLen:]
		if len(pkt) > 1500 {
			continue
		}
		frame[1] = vnetGSONone // one packet, checksum left to us
		out := [][]byte{make([]byte, Headroom+1500)}
		sizes := []int{0}
		n, next, err := splitRead(frame, out, sizes, Headroom, 0)
		if err != nil || n != 1 || next != 0 {
			t.Fatalf("split = %d, %d, %v", n, next, err)
		}
		if err := packet.Verify(out[0][Headroom : Headroom+sizes[0]]); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSplitIntoShortBuffers: buffers smaller than the packets (the MTU went
// up) give an error the data path counts as too big, never a panic or a
// truncated packet.
func TestSplitIntoShortBuffers(t *testing.T) {
	frame, _ := superFrame(t, rand.New(rand.NewPCG(11, 12)))
	out := [][]byte{make([]byte, Headroom+30)}
	_, _, err := splitRead(frame, out, []int{0}, Headroom, 0)
	if !errors.Is(err, io.ErrShortBuffer) {
		t.Fatalf("split into 30-byte buffers: %v, want io.ErrShortBuffer", err)
	}
}

// TestPseudoSumCarries: addresses whose sum fills the 64-bit accumulator
// must not lose the carry that adding the protocol and length makes.
func TestPseudoSumCarries(t *testing.T) {
	for _, addrs := range [][]byte{
		bytes.Repeat([]byte{0xff}, 8),
		bytes.Repeat([]byte{0xff}, 32),
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe},
		make([]byte, 8),
	} {
		half := len(addrs) / 2
		for _, length := range []int{0, 1, 0xffff} {
			got := foldLE(pseudoSumLE(sumLE(addrs, 0), protoUDP, length))
			if want := pseudoRef(addrs[:half], addrs[half:], protoUDP, length); got != want {
				t.Errorf("addresses %x, length %d: %#x, want %#x", addrs, length, got, want)
			}
		}
	}
}

// BenchmarkSumLE: the checksum over one full-size segment's payload.
func BenchmarkSumLE(b *testing.B) {
	buf := make([]byte, 1380)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	b.SetBytes(int64(len(buf)))
	var sink uint64
	for b.Loop() {
		sink += sumLE(buf, 0)
	}
	_ = sink
}
