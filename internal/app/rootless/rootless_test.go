package rootless

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/internal/testkit/dnstest"
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

func TestResolverNeedsServers(t *testing.T) {
	if (&Services{}).resolver() != nil {
		t.Fatal("a resolver without name servers")
	}
}

// The proxies' resolver asks the configured servers in order, through
// the stack, with the search domains, and nothing of the host's: a
// silent server passes the question on, and localhost is not the host's.
func TestResolverAsksTunnelServers(t *testing.T) {
	self := netip.MustParseAddr("10.0.0.2")
	ns, err := netstack.New(netstack.Options{Addresses: []netip.Addr{self}})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	pc, err := ns.ListenUDPAddrPort(netip.AddrPortFrom(self, 53))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go dnstest.Serve(pc, "web.internal.", self)
	s := &Services{ns: ns, addrs: []netip.Addr{self}, o: Options{
		DNS: []netip.Addr{netip.MustParseAddr("192.0.2.1"), self}, DNSSearch: []string{"internal"},
	}}
	resolve := s.resolver()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if got, err := resolve(ctx, "web"); err != nil || got != self {
		t.Fatalf("web: got %v, %v; want %v", got, err, self)
	}
	s.o.DNS = s.o.DNS[1:] // spare the silent server's timeouts
	_, err = s.resolver()(ctx, "localhost")
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound || dnsErr.Server != netip.AddrPortFrom(self, 53).String() {
		t.Fatalf("localhost: %v, want not found from %v", err, self)
	}
}
