package cli

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
)

func TestParseCIDRs(t *testing.T) {
	got, err := parseCIDRs("--exit-allow", []string{"10.0.0.0/8, 192.0.2.1", "2001:db8::/32", ""})
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.1/32"), netip.MustParsePrefix("2001:db8::/32")}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0.0/8,nonsense"} {
		if _, err := parseCIDRs("--exit-deny", []string{bad}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestHostResolvers(t *testing.T) {
	p := filepath.Join(t.TempDir(), "resolv.conf")
	os.WriteFile(p, []byte("# x\nnameserver 127.0.0.53\nnameserver fe80::1%eth0\nnameserver 2001:db8::53\nsearch example\nnameserver bad\n"), 0o644)
	got := hostResolvers(p)
	want := []netip.AddrPort{netip.MustParseAddrPort("127.0.0.53:53"), netip.MustParseAddrPort("[2001:db8::53]:53")}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if hostResolvers(filepath.Join(t.TempDir(), "none")) != nil {
		t.Fatal("a missing file gives resolvers")
	}
}

func TestPeerTable(t *testing.T) {
	var a, b noise.PublicKey
	a[0], b[0] = 1, 2
	calls := 0
	st := device.Status{Peers: []device.PeerStatus{
		{PublicKey: a, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}},
		{PublicKey: b, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.0.0.7/32")}},
	}}
	pt := &peerTable{status: func() device.Status { calls++; return st }}
	for _, tc := range []struct {
		addr string
		want string
		ok   bool
	}{{"10.0.0.1", a.String(), true}, {"10.0.0.7", b.String(), true}, {"::ffff:10.0.0.7", b.String(), true}, {"10.0.1.1", "", false}} {
		got, ok := pt.lookup(netip.MustParseAddr(tc.addr))
		if got != tc.want || ok != tc.ok {
			t.Errorf("lookup(%s) = %q, %v; want %q, %v", tc.addr, got, ok, tc.want, tc.ok)
		}
	}
	if calls != 1 {
		t.Errorf("status read %d times for four lookups within a second, want 1", calls)
	}
}
