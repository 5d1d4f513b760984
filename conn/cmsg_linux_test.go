package conn

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCmsgSizesMatchKernelMacros(t *testing.T) {
	for _, n := range []int{0, 1, 2, 4, unix.SizeofInet4Pktinfo, unix.SizeofInet6Pktinfo} {
		if cmsgSpace(n) != unix.CmsgSpace(n) || cmsgLen(n) != unix.CmsgLen(n) {
			t.Fatalf("data %d: space %d len %d, x/sys says %d %d", n, cmsgSpace(n), cmsgLen(n), unix.CmsgSpace(n), unix.CmsgLen(n))
		}
	}
	if segSpace != cmsgSpace(4) || pktinfo6Space != cmsgSpace(unix.SizeofInet6Pktinfo) {
		t.Fatal("constant cmsg sizes disagree with cmsgSpace")
	}
}

func TestControlRoundTrip(t *testing.T) {
	for _, c := range []control{
		{},
		{segSize: 1420},
		{src: netip.MustParseAddr("127.0.0.3")},
		{src: netip.MustParseAddr("192.0.2.7"), ifIndex: 3, segSize: 65535},
		{src: netip.MustParseAddr("::1"), ifIndex: 1},
		{src: netip.MustParseAddr("fe80::1"), ifIndex: 7, segSize: 1},
	} {
		b := make([]byte, txCtrlSpace)
		for i := range b {
			b[i] = 0xAA // stale bytes must not survive into the parsed result
		}
		n, err := writeControl(b, c)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		got, err := parseControl(b[:n])
		if err != nil || got != c {
			t.Fatalf("round trip of %+v: %+v, %v", c, got, err)
		}
	}
}

func TestWriteControlErrors(t *testing.T) {
	if _, err := writeControl(make([]byte, 8), control{segSize: 1}); err == nil {
		t.Fatal("control into too small a buffer did not fail")
	}
	for _, seg := range []int{-1, 1 << 16} {
		if _, err := writeControl(make([]byte, txCtrlSpace), control{segSize: seg}); err == nil {
			t.Fatalf("segment size %d accepted", seg)
		}
	}
}

// kernelGRO builds the control the kernel hands to recvmsg for a coalesced
// IPv4 read: IP_PKTINFO, then UDP_GRO as an int.
func kernelGRO(seg int32, dst [4]byte, ifIndex int32) []byte {
	b := make([]byte, cmsgSpace(unix.SizeofInet4Pktinfo)+cmsgSpace(4))
	d := putCmsgHeader(b, unix.IPPROTO_IP, unix.IP_PKTINFO, unix.SizeofInet4Pktinfo)
	binary.NativeEndian.PutUint32(d, uint32(ifIndex))
	copy(d[4:], dst[:]) // ipi_spec_dst
	copy(d[8:], dst[:]) // ipi_addr
	d = putCmsgHeader(b[cmsgSpace(unix.SizeofInet4Pktinfo):], unix.SOL_UDP, unix.UDP_GRO, 4)
	binary.NativeEndian.PutUint32(d, uint32(seg))
	return b
}

func TestParseKernelControl(t *testing.T) {
	got, err := parseControl(kernelGRO(1420, [4]byte{127, 0, 0, 3}, 1))
	want := control{segSize: 1420, src: netip.MustParseAddr("127.0.0.3"), ifIndex: 1}
	if err != nil || got != want {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	// An unknown message is skipped, not an error.
	b := make([]byte, cmsgSpace(4))
	putCmsgHeader(b, unix.SOL_SOCKET, unix.SO_TIMESTAMP, 4)
	if c, err := parseControl(append(b, kernelGRO(100, [4]byte{192, 0, 2, 1}, 2)...)); err != nil || c.segSize != 100 {
		t.Fatalf("unknown cmsg first: %+v, %v", c, err)
	}
}

// putCmsgLen overwrites a header's cmsg_len in the platform's width.
func putCmsgLen(b []byte, l uint64) {
	if cmsgAlignTo == 8 {
		binary.NativeEndian.PutUint64(b, l)
	} else {
		binary.NativeEndian.PutUint32(b, uint32(l))
	}
}

func TestParseControlRejects(t *testing.T) {
	good := kernelGRO(1420, [4]byte{127, 0, 0, 1}, 1)
	for name, b := range map[string][]byte{
		"short header":  good[:cmsgHdrLen-1],
		"cut data":      good[:cmsgLen(unix.SizeofInet4Pktinfo)-1],
		"negative seg":  kernelGRO(-5, [4]byte{}, 0),
		"huge seg":      kernelGRO(1<<20, [4]byte{}, 0),
		"len below hdr": func() []byte { b := append([]byte{}, good...); putCmsgLen(b, 3); return b }(),
		"len past end":  func() []byte { b := append([]byte{}, good...); putCmsgLen(b, 1<<30); return b }(),
		"pktinfo6 short": func() []byte {
			b := make([]byte, cmsgSpace(4))
			putCmsgHeader(b, unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, 4)
			return b
		}(),
	} {
		if c, err := parseControl(b); err == nil {
			t.Errorf("%s: parsed as %+v, want an error", name, c)
		}
	}
}

func TestSockaddrRoundTrip(t *testing.T) {
	for _, s := range []string{"127.0.0.1:51820", "192.0.2.1:1", "[::1]:65535", "[2001:db8::5]:443"} {
		ap := netip.MustParseAddrPort(s)
		var b sockaddrBuf
		n := putSockaddr(&b, ap, 0)
		got, ok := parseSockaddr(b[:n])
		if !ok || got != ap {
			t.Fatalf("%s: got %v %v", s, got, ok)
		}
	}
	for _, b := range [][]byte{nil, {1, 2, 3}, make([]byte, unix.SizeofSockaddrInet6)} {
		if _, ok := parseSockaddr(b); ok {
			t.Fatalf("garbage %x parsed", b)
		}
	}
}

// FuzzParseControl: arbitrary control bytes never panic, and whatever
// parses re-encodes to bytes that parse to the same thing (less the
// receive timestamp, which only the kernel writes). Seeded with the
// writer's encodings and kernel-shaped reads.
func FuzzParseControl(f *testing.F) {
	for _, c := range []control{
		{segSize: 1420, src: netip.MustParseAddr("127.0.0.1"), ifIndex: 1},
		{segSize: 9, src: netip.MustParseAddr("::1"), ifIndex: 1},
		{segSize: 2},
	} {
		b := make([]byte, txCtrlSpace)
		n, _ := writeControl(b, c)
		f.Add(b[:n])
	}
	f.Add(kernelGRO(1280, [4]byte{127, 0, 0, 9}, 1))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseControl(b)
		if err != nil {
			return
		}
		if c.segSize < 0 || c.segSize > 1<<16-1 {
			t.Fatalf("parsed segment size %d out of range", c.segSize)
		}
		buf := make([]byte, txCtrlSpace)
		n, err := writeControl(buf, c)
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", c, err)
		}
		// The receive timestamp is the kernel's to give: the writer, which
		// builds what goes out, has no field for it.
		c.rxTime = 0
		again, err := parseControl(buf[:n])
		if err != nil || again != c {
			t.Fatalf("round trip of %+v: %+v, %v", c, again, err)
		}
	})
}

// The kernel's receive timestamp, in either layout, becomes Unix
// nanoseconds; a cut one is an error.
func TestParseTimestamp(t *testing.T) {
	b := make([]byte, cmsgSpace(16))
	d := putCmsgHeader(b, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS_NEW, 16)
	binary.NativeEndian.PutUint64(d, 1700000000)
	binary.NativeEndian.PutUint64(d[8:], 123456789)
	c, err := parseControl(append(b, kernelGRO(1420, [4]byte{127, 0, 0, 1}, 1)...))
	if err != nil || c.rxTime != 1700000000_123456789 || c.segSize != 1420 {
		t.Fatalf("got %+v, %v", c, err)
	}
	if unix.SizeofPtr == 8 {
		putCmsgHeader(b, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS_OLD, 16)
		if c, err := parseControl(b); err != nil || c.rxTime != 1700000000_123456789 {
			t.Fatalf("old layout: got %+v, %v", c, err)
		}
	}
	short := make([]byte, cmsgSpace(4))
	putCmsgHeader(short, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS_NEW, 4)
	if c, err := parseControl(short); err == nil {
		t.Fatalf("cut timestamp parsed as %+v", c)
	}
}
