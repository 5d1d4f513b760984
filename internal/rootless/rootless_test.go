package rootless

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/tun/netstack"
)

func TestAllowedRoutes(t *testing.T) {
	p := netip.MustParsePrefix
	cfg := &device.Config{Peers: []device.PeerConfig{
		{AllowedIPs: []device.AllowedIPChange{{Prefix: p("10.0.0.1/24")}, {Prefix: p("fd00::/64")}}},
		{AllowedIPs: []device.AllowedIPChange{{Prefix: p("10.0.0.0/24")}, {Prefix: p("10.9.0.0/16"), Remove: true}}},
	}}
	want := []netip.Prefix{p("10.0.0.0/24"), p("fd00::/64")}
	if got := AllowedRoutes(cfg); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v (masked, each once, removals left out)", got, want)
	}
}

// A service that cannot start leaves none of the others running, and its
// error names what failed.
func TestStartFailsWhole(t *testing.T) {
	ns, err := netstack.New(netstack.Options{Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.2")}})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	// A fixed port, so that a forward left listening would make the second
	// Start fail.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	local := ln.Addr().String()
	ln.Close()
	fwd := []Forward{{Local: local, Remote: netip.MustParseAddrPort("10.0.0.1:80")}}
	s, err := Start(context.Background(), ns, nil, Options{Forwards: fwd, SOCKS5: "256.0.0.1:1080"})
	if err == nil {
		s.Close()
		t.Fatal("an unusable SOCKS5 address was accepted")
	}
	if !strings.Contains(err.Error(), "SOCKS5") || !strings.Contains(err.Error(), "256.0.0.1:1080") {
		t.Errorf("error %q does not name the SOCKS5 proxy's address", err)
	}
	s, err = Start(context.Background(), ns, nil, Options{Forwards: fwd})
	if err != nil {
		t.Fatalf("the forward's port is still taken after the failed start: %v", err)
	}
	if len(s.Addrs()) != 1 {
		t.Fatalf("addrs %v", s.Addrs())
	}
	s.Close()
}

func TestTunnelResolverNeedsServers(t *testing.T) {
	if TunnelResolver(nil, nil, nil) != nil {
		t.Fatal("a resolver without name servers")
	}
}
