package tunnel_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/fips-go/fips-go/tunnel"
)

// silentAddr is routed to the server tunnel, which does not own it: a
// name server there never answers.
var silentAddr = netip.MustParseAddr("10.77.0.9")

// pairWith is pair with the client's [Interface] lines iface and its
// Options o; the server serves web.test. at serverAddr on port 53.
func pairWith(t *testing.T, iface string, o tunnel.Options) (server, client *tunnel.Tunnel) {
	t.Helper()
	sk, ck := newKey(), newKey()
	server = open(t, serverConf(sk, ck), tunnel.Options{Logf: t.Logf})
	go serveName(server, "web.test.", serverAddr)
	o.Logf = t.Logf
	client = open(t, clientConf(ck, sk, iface, fmt.Sprint("127.0.0.1:", server.Status().ListenPort)), o)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := client.WaitHandshake(ctx); err != nil {
		t.Fatal("client:", err)
	}
	return server, client
}

// A first name server that never answers costs one per-server timeout,
// and the second one answers.
func TestLookupSecondServer(t *testing.T) {
	_, client := pairWith(t, fmt.Sprintf("DNS = %v, %v\n", silentAddr, serverAddr), tunnel.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, err := client.LookupNetIP(ctx, "ip4", "web.test")
	if err != nil || len(got) != 1 || got[0] != serverAddr {
		t.Fatalf("lookup with a silent first server: %v, %v; want [%v]", got, err, serverAddr)
	}
}

// The host's /etc/hosts means nothing inside the tunnel: localhost is
// whatever the tunnel's server says, here nothing.
func TestLookupIgnoresHostsFile(t *testing.T) {
	_, client := pairWith(t, fmt.Sprintf("DNS = %v, test\n", serverAddr), tunnel.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, name := range []string{"localhost", "localhost."} {
		got, err := client.LookupNetIP(ctx, "ip", name)
		var dnsErr *net.DNSError
		if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
			t.Errorf("%s: got %v, %v; want a not-found error from the tunnel's server", name, got, err)
		}
	}
}

// A failed lookup's error names the server inside the tunnel that said
// so, and the name asked.
func TestLookupErrorNamesServer(t *testing.T) {
	_, client := pairWith(t, fmt.Sprintf("DNS = %v\n", serverAddr), tunnel.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := client.LookupNetIP(ctx, "ip", "nope.test")
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) {
		t.Fatalf("got %v (%T), want a *net.DNSError", err, err)
	}
	want := netip.AddrPortFrom(serverAddr, 53).String()
	if dnsErr.Server != want || !dnsErr.IsNotFound || dnsErr.IsTimeout || dnsErr.Name != "nope.test" {
		t.Fatalf("got %+v, want a not-found error for nope.test from %s", dnsErr, want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %s", err, want)
	}
}

// Options.Hosts answers without any DNS server, for lookups and dials
// alike; a name outside it still needs DNS.
func TestHostsWithoutDNS(t *testing.T) {
	server, client := pairWith(t, "", tunnel.Options{Hosts: map[string][]netip.Addr{"Web.Internal.": {serverAddr}}})
	ln, err := server.Listen("tcp", ":80")
	if err != nil {
		t.Fatal(err)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.Host)
	}))
	if got := get(t, client.HTTPClient(), "http://web.internal/"); got != "hello web.internal" {
		t.Fatalf("GET by a name in Hosts: %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, err := client.LookupHost(ctx, "web.INTERNAL")
	if err != nil || len(got) != 1 || got[0] != serverAddr.String() {
		t.Fatalf("LookupHost from Hosts: %v, %v", got, err)
	}
	if _, err := client.LookupNetIP(ctx, "ip", "web.test"); !errors.Is(err, tunnel.ErrNoDNS) {
		t.Fatalf("a name outside Hosts without DNS: %v, want ErrNoDNS", err)
	}
}
