package pmtu

import (
	"encoding/binary"
	"testing"

	"github.com/fips-go/fips-go/internal/packet"
)

func syn(t testing.TB, v6 bool, opts []byte, flags uint8) []byte {
	src, dst := a4, b4
	if v6 {
		src, dst = a6, b6
	}
	p, err := packet.TCP(packet.TCPSegment{Src: src, Dst: dst, Flags: flags, Window: 64240, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mssOf(pkt []byte) (int, bool) {
	in, err := packet.Parse(pkt)
	if err != nil || in.Proto != packet.ProtoTCP {
		return 0, false
	}
	h := packet.TCPHeader(in.Transport)
	o := in.Transport[packet.TCPHeaderLen:h.HeaderLen()]
	for i := 0; i+1 < len(o); {
		switch {
		case o[i] == 0:
			return 0, false
		case o[i] == 1:
			i++
		case o[i] == 2 && o[i+1] == 4 && i+4 <= len(o):
			return int(binary.BigEndian.Uint16(o[i+2:])), true
		case o[i+1] < 2:
			return 0, false
		default:
			i += int(o[i+1])
		}
	}
	return 0, false
}

func TestClampMSS(t *testing.T) {
	mssOpt := func(v uint16) []byte { return []byte{2, 4, byte(v >> 8), byte(v)} }
	for _, c := range []struct {
		name  string
		v6    bool
		opts  []byte
		flags uint8
		inner int
		want  int
		clamp bool
	}{
		{"v4 syn", false, mssOpt(1380), packet.TCPSyn, 1220, 1180, true},
		{"v6 syn-ack", true, mssOpt(1360), packet.TCPSyn | packet.TCPAck, 1200, 1140, true}, // under IPv6's 1280: segments need no fragments
		{"v6 syn", true, mssOpt(1360), packet.TCPSyn, 1340, 1280, true},
		{"already small", false, mssOpt(1000), packet.TCPSyn, 1220, 1000, false},
		{"not syn", false, mssOpt(1380), packet.TCPAck, 1220, 1380, false},
		{"unknown path", false, mssOpt(1380), packet.TCPSyn, 0, 1380, false},
		// MSS after a NOP: its value sits at an odd offset.
		{"odd offset", false, append([]byte{1}, append(mssOpt(1460), 1, 1, 1)...), packet.TCPSyn, 1220, 1180, true},
		{"after sack-perm and ts", false, append([]byte{4, 2, 8, 10, 1, 2, 3, 4, 5, 6, 7, 8}, mssOpt(1460)...), packet.TCPSyn, 1220, 1180, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := syn(t, c.v6, c.opts, c.flags)
			if got := ClampMSS(p, c.inner); got != c.clamp {
				t.Fatalf("ClampMSS = %v, want %v", got, c.clamp)
			}
			if err := packet.Verify(p); err != nil {
				t.Fatalf("checksum after clamp: %v", err)
			}
			if got, _ := mssOf(p); got != c.want {
				t.Fatalf("MSS %d, want %d", got, c.want)
			}
		})
	}
}

// FuzzClampMSS: whatever the bytes, ClampMSS never panics; on a segment
// whose checksum was right it stays right, the MSS never rises, and a
// clamped MSS is the one the inner MTU gives.
func FuzzClampMSS(f *testing.F) {
	f.Add(false, []byte{2, 4, 5, 0xb4}, uint16(1220), uint8(packet.TCPSyn))
	f.Add(true, []byte{1, 2, 4, 5, 0xa0, 1, 1, 1}, uint16(1200), uint8(packet.TCPSyn|packet.TCPAck))
	f.Add(false, []byte{3, 3, 7, 2, 4, 0xff, 0xff, 0}, uint16(1300), uint8(packet.TCPSyn))
	f.Add(false, []byte{2, 0, 2, 4}, uint16(1300), uint8(packet.TCPSyn))
	f.Fuzz(func(t *testing.T, v6 bool, opts []byte, inner uint16, flags uint8) {
		if len(opts) > 40 {
			opts = opts[:40]
		}
		opts = append(opts, make([]byte, (4-len(opts)%4)%4)...)
		p := syn(t, v6, opts, flags)
		before, had := mssOf(p)
		changed := ClampMSS(p, int(inner))
		if err := packet.Verify(p); err != nil {
			t.Fatalf("checksum broken: %v", err)
		}
		after, has := mssOf(p)
		if had != has || after > before {
			t.Fatalf("MSS %d (%v) became %d (%v)", before, had, after, has)
		}
		v := 4
		if v6 {
			v = 6
		}
		if changed && after != MSS(int(inner), v) {
			t.Fatalf("clamped to %d, want %d", after, MSS(int(inner), v))
		}
		// Arbitrary bytes (a truncated or lying header) never panic.
		for n := 0; n < len(p); n += 7 {
			ClampMSS(p[:n], int(inner))
		}
	})
}
