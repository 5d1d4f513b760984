package userns

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// attrs walks the rtnetlink attributes of b, returning them by type.
func attrs(t *testing.T, b []byte) map[uint16][]byte {
	t.Helper()
	out := map[uint16][]byte{}
	for len(b) > 0 {
		if len(b) < 4 {
			t.Fatalf("trailing %d bytes", len(b))
		}
		l := int(binary.NativeEndian.Uint16(b))
		if l < 4 || l > len(b) {
			t.Fatalf("attribute length %d of %d", l, len(b))
		}
		out[binary.NativeEndian.Uint16(b[2:])] = b[4:l]
		b = b[(l+3)&^3:]
	}
	return out
}

func TestRouteMsg(t *testing.T) {
	m := routeMsg(7, netip.MustParsePrefix("10.1.2.3/16"))
	if m[0] != unix.AF_INET || m[1] != 16 || m[4] != unix.RT_TABLE_MAIN {
		t.Fatalf("header % x", m[:12])
	}
	a := attrs(t, m[12:])
	if got := netip.AddrFrom4([4]byte(a[unix.RTA_DST])); got != netip.MustParseAddr("10.1.0.0") {
		t.Errorf("RTA_DST %v, want the masked 10.1.0.0", got)
	}
	if binary.NativeEndian.Uint32(a[unix.RTA_OIF]) != 7 {
		t.Errorf("RTA_OIF %v", a[unix.RTA_OIF])
	}
	// The default route has no destination attribute.
	d := attrs(t, routeMsg(7, netip.MustParsePrefix("::/0"))[12:])
	if _, ok := d[unix.RTA_DST]; ok {
		t.Error("default route carries RTA_DST")
	}
}

func TestAddrMsg(t *testing.T) {
	m := addrMsg(3, netip.MustParsePrefix("fd00::2/64"))
	if m[0] != unix.AF_INET6 || m[1] != 64 || binary.NativeEndian.Uint32(m[4:]) != 3 {
		t.Fatalf("header % x", m[:8])
	}
	a := attrs(t, m[8:])
	if netip.AddrFrom16([16]byte(a[unix.IFA_LOCAL])) != netip.MustParseAddr("fd00::2") {
		t.Errorf("IFA_LOCAL %x", a[unix.IFA_LOCAL])
	}
	if binary.NativeEndian.Uint32(a[unix.IFA_FLAGS])&unix.IFA_F_NODAD == 0 {
		t.Error("IPv6 address without IFA_F_NODAD")
	}
}
