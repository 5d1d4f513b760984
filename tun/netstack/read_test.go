package netstack

import (
	"bytes"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/fips-go/fips-go/internal/packet"
	"github.com/fips-go/fips-go/tun"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// gsoPacket builds a PacketBuffer the way gVisor's TCP hands a super-packet
// to a HostGSO endpoint: payload in the data, TCP and IP headers pushed in
// front, GSO options set. The TCP checksum is left wrong on purpose (the
// stack leaves a partial one), so the test proves Read computes it.
func gsoPacket(t testing.TB, payload []byte, mss int) *stack.PacketBuffer {
	flat, err := packet.TCP(packet.TCPSegment{
		Src: netip.AddrPortFrom(addrA4, 1000), Dst: netip.AddrPortFrom(addrB4, 2000),
		Seq: 1, Ack: 2, Flags: packet.TCPAck | packet.TCPPsh, Window: 100, IPID: 9,
	})
	if err != nil {
		t.Fatal(err)
	}
	flat[20+16], flat[20+17] = 0xde, 0xad
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{ReserveHeaderBytes: 40, Payload: buffer.MakeWithData(payload)})
	copy(pkt.TransportHeader().Push(20), flat[20:40])
	copy(pkt.NetworkHeader().Push(20), flat[:20])
	pkt.GSOOptions = stack.GSO{Type: stack.GSOTCPv4, NeedsCsum: true, MSS: uint16(mss), L3HdrLen: 20}
	return pkt
}

// TestReadSegmentsAcrossReads queues one super-packet and reads it with
// buffers for only three packets at a time: segments continue in order
// across Reads and all are valid.
func TestReadSegmentsAcrossReads(t *testing.T) {
	n, err := New(Options{Addresses: []netip.Addr{addrA4}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	payload := make([]byte, 20000)
	for i := range payload {
		payload[i] = byte(i * 13)
	}
	pkt := gsoPacket(t, payload, 1360)
	if err := n.ep.q.push(pkt, segmentCount(pkt), true); err != nil {
		t.Fatal(err)
	}
	pkt.DecRef()
	bufs := make([][]byte, 3)
	for i := range bufs {
		bufs[i] = make([]byte, tun.Headroom+DefaultMTU)
	}
	sizes := make([]int, 3)
	var got []byte
	for len(got) < len(payload) {
		k, err := n.Read(bufs, sizes, tun.Headroom)
		if err != nil {
			t.Fatal(err)
		}
		for i := range k {
			seg := bufs[i][tun.Headroom : tun.Headroom+sizes[i]]
			if err := packet.Verify(seg); err != nil {
				t.Fatalf("segment %d: %v", len(got)/1360, err)
			}
			in, _ := packet.Parse(seg)
			if in.Seq != 1+uint32(len(got)) {
				t.Fatalf("segment seq %d, want %d", in.Seq, 1+len(got))
			}
			got = append(got, in.Payload...)
		}
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("payload differs")
	}
	if s := n.Stats(); s.GSOPackets != 1 || s.GSOSegments != 15 || s.QueueLen != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestReadAllocs checks that Read, segmenting included, allocates nothing
// in steady state.
func TestReadAllocs(t *testing.T) {
	n, err := New(Options{Addresses: []netip.Addr{addrA4}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	pkt := gsoPacket(t, make([]byte, 60000), 1360)
	defer pkt.DecRef()
	bufs := make([][]byte, defaultBatchSize)
	for i := range bufs {
		bufs[i] = make([]byte, tun.Headroom+DefaultMTU)
	}
	sizes := make([]int, len(bufs))
	var segs atomic.Int64
	allocs := testing.AllocsPerRun(100, func() {
		_ = n.ep.q.push(pkt, segmentCount(pkt), true)
		k, _ := n.Read(bufs, sizes, tun.Headroom)
		segs.Add(int64(k))
	})
	if allocs != 0 {
		t.Fatalf("Read allocates %.1f times per super-packet", allocs)
	}
	if segs.Load() != 101*45 {
		t.Fatalf("read %d segments, want %d", segs.Load(), 101*45)
	}
}

// BenchmarkRead measures cutting a 60 KB super-packet into 45 segments.
func BenchmarkRead(b *testing.B) {
	n, err := New(Options{Addresses: []netip.Addr{addrA4}})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	pkt := gsoPacket(b, make([]byte, 60000), 1360)
	defer pkt.DecRef()
	bufs := make([][]byte, defaultBatchSize)
	for i := range bufs {
		bufs[i] = make([]byte, tun.Headroom+DefaultMTU)
	}
	sizes := make([]int, len(bufs))
	b.SetBytes(60000)
	b.ReportAllocs()
	for b.Loop() {
		_ = n.ep.q.push(pkt, segmentCount(pkt), true)
		_, _ = n.Read(bufs, sizes, tun.Headroom)
	}
}
