package netstack

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/fips-go/fips-go/internal/packet"
)

// superPacket builds a TCP super-packet as the stack would hand it over.
func superPacket(t testing.TB, v6 bool, flags uint8, opts []byte, payload []byte) []byte {
	src, dst := netip.MustParseAddrPort("10.1.2.3:4000"), netip.MustParseAddrPort("10.9.8.7:443")
	if v6 {
		src, dst = netip.MustParseAddrPort("[fd00::3]:4000"), netip.MustParseAddrPort("[fd00::7]:443")
	}
	p, err := packet.TCP(packet.TCPSegment{
		Src: src, Dst: dst, Seq: 0xfffff000, Ack: 77, Flags: flags, Window: 500,
		IPID: 0xfffe, Options: opts, Payload: payload,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// segmentAll cuts p with mss and checks every segment against the
// properties a TSO NIC guarantees; it returns the concatenated payload.
func segmentAll(t testing.TB, p []byte, mss int) []byte {
	var s segmenter
	if err := s.startFlat(p, mss); err != nil {
		t.Fatalf("startFlat: %v", err)
	}
	orig, err := packet.Parse(p)
	if err != nil {
		t.Fatal(err)
	}
	hdrLen := len(p) - len(orig.Payload)
	want := segments(len(orig.Payload), mss)
	var payload []byte
	buf := make([]byte, hdrLen+mss)
	for i := 0; s.active(); i++ {
		if i >= want {
			t.Fatalf("more than %d segments", want)
		}
		n := s.next(buf)
		seg := buf[:n]
		if err := packet.Verify(seg); err != nil {
			t.Fatalf("segment %d: %v", i, err)
		}
		in, _ := packet.Parse(seg)
		if len(in.Payload) > mss || (i < want-1 && len(in.Payload) != mss) {
			t.Fatalf("segment %d carries %d bytes with MSS %d", i, len(in.Payload), mss)
		}
		if in.Seq != orig.Seq+uint32(len(payload)) || in.Ack != orig.Ack || in.Window != orig.Window ||
			in.SrcPort != orig.SrcPort || in.DstPort != orig.DstPort || in.Src != orig.Src || in.Dst != orig.Dst {
			t.Fatalf("segment %d header %+v, super-packet %+v", i, in, orig)
		}
		if in.Version == 4 && in.IPID != orig.IPID+uint16(i) {
			t.Fatalf("segment %d IP ID %d, want %d", i, in.IPID, orig.IPID+uint16(i))
		}
		last := i == want-1
		wantFlags := orig.Flags
		if !last {
			wantFlags &^= packet.TCPFin | packet.TCPPsh
		}
		if i > 0 {
			wantFlags &^= packet.TCPCwr
		}
		if in.Flags != wantFlags {
			t.Fatalf("segment %d flags %#x, want %#x", i, in.Flags, wantFlags)
		}
		if !bytes.Equal(seg[len(orig.IPHeader)+20:hdrLen], p[len(orig.IPHeader)+20:hdrLen]) {
			t.Fatalf("segment %d TCP options changed", i)
		}
		payload = append(payload, in.Payload...)
	}
	if s.index != want {
		t.Fatalf("%d segments, want %d", s.index, want)
	}
	return payload
}

func TestSegmenter(t *testing.T) {
	tsOpt := []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, v6 := range []bool{false, true} {
		for _, size := range []int{0, 1, 1367, 1368, 1369, 4000, 65000} {
			payload := make([]byte, size)
			for i := range payload {
				payload[i] = byte(rng.Uint32())
			}
			p := superPacket(t, v6, packet.TCPAck|packet.TCPPsh|packet.TCPFin|packet.TCPCwr, tsOpt, payload)
			if got := segmentAll(t, p, 1368); !bytes.Equal(got, payload) {
				t.Fatalf("v6=%v size %d: payload differs after segmentation", v6, size)
			}
		}
	}
}

func TestSegmenterRejects(t *testing.T) {
	good := superPacket(t, false, packet.TCPAck, nil, make([]byte, 3000))
	udp, _ := packet.UDP(netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.0.0.2:2"), make([]byte, 100))
	badOff := append([]byte(nil), good...)
	badOff[20+12] = 0x40 // data offset 16 bytes, shorter than a TCP header
	for name, tc := range map[string]struct {
		p   []byte
		mss int
	}{
		"udp":               {udp, 1000},
		"short":             {good[:10], 1000},
		"zero mss":          {good, 0},
		"short data offset": {badOff, 1000},
		"version 5":         {append([]byte{0x55}, good[1:]...), 1000},
	} {
		var s segmenter
		if err := s.startFlat(tc.p, tc.mss); !errors.Is(err, errBadSuperPacket) {
			t.Errorf("%s: err = %v, want errBadSuperPacket", name, err)
		}
	}
}

// FuzzSegmenter cuts random super-packets with random MSS values: every
// segment must be a valid packet and the payloads must concatenate to the
// original. Arbitrary bytes are fed to startFlat as well, which must reject
// or accept them without panicking.
func FuzzSegmenter(f *testing.F) {
	f.Add(uint16(3000), uint16(1368), false, uint8(packet.TCPAck|packet.TCPPsh), uint8(3), []byte{})
	f.Add(uint16(65000), uint16(1220), true, uint8(packet.TCPAck|packet.TCPFin), uint8(0), []byte{})
	f.Add(uint16(0), uint16(1), false, uint8(packet.TCPAck), uint8(10), []byte{0x45, 0, 0, 40})
	f.Fuzz(func(t *testing.T, size, mss uint16, v6 bool, flags, nopts uint8, raw []byte) {
		var s segmenter
		if err := s.startFlat(raw, int(mss)); err == nil {
			buf := make([]byte, 1<<17)
			for i := 0; s.active() && i < 1<<16; i++ {
				s.next(buf[:s.nextLen()])
			}
		}
		if mss == 0 || int(size) > 65535-120 {
			return
		}
		opts := make([]byte, 4*int(nopts%11))
		for i := range opts {
			opts[i] = 1 // NOP
		}
		payload := make([]byte, size)
		for i := range payload {
			payload[i] = byte(i*7 + int(size))
		}
		p := superPacket(t, v6, flags&^packet.TCPSyn, opts, payload)
		if got := segmentAll(t, p, int(mss)); !bytes.Equal(got, payload) {
			t.Fatal("payload differs after segmentation")
		}
	})
}
