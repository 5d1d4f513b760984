package tunnel

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fips-go/fips-go/device"
	"gvisor.dev/gvisor/pkg/log"
)

func openLone(t *testing.T, logf func(string, ...any)) *Tunnel {
	t.Helper()
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tn, err := OpenBytes(context.Background(), []byte(fmt.Sprintf(
		"[Interface]\nPrivateKey = %s\nAddress = 10.1.0.1/24\n", base64.StdEncoding.EncodeToString(k.Bytes()))),
		Options{Logf: logf})
	if err != nil {
		t.Fatal(err)
	}
	return tn
}

// gVisor's log lines reach the open tunnels' loggers, not stderr, and
// stop reaching a tunnel once it is closed.
func TestGVisorLogRouted(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	tn := openLone(t, func(format string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(format, args...))
		mu.Unlock()
	})
	log.Warningf("routed %d", 1)
	tn.Close()
	log.Warningf("routed %d", 2)
	mu.Lock()
	defer mu.Unlock()
	got := strings.Join(lines, "\n")
	if !strings.Contains(got, "routed 1") || strings.Contains(got, "routed 2") {
		t.Fatalf("logged:\n%s", got)
	}
}

func TestPending(t *testing.T) {
	ep := netip.MustParseAddrPort("192.0.2.1:51820")
	now := time.Now()
	for _, c := range []struct {
		name     string
		peers    []device.PeerStats
		waiting  int
		wantDone bool
	}{
		{"server before any client", []device.PeerStats{{}, {}}, 0, false},
		{"server after one client", []device.PeerStats{{LastHandshake: now}, {}}, 0, true},
		{"client waiting", []device.PeerStats{{Endpoint: ep}}, 1, false},
		{"client done", []device.PeerStats{{Endpoint: ep, LastHandshake: now}}, 0, true},
		{"one of two", []device.PeerStats{{Endpoint: ep, LastHandshake: now}, {Endpoint: ep}}, 1, false},
	} {
		w, done := pending(c.peers)
		if len(w) != c.waiting || done != c.wantDone {
			t.Errorf("%s: waiting %d, done %v", c.name, len(w), done)
		}
	}
}

func TestRoutedBy(t *testing.T) {
	tn := &Tunnel{addrs: []netip.Addr{netip.MustParseAddr("10.1.0.2")}}
	p := netip.MustParsePrefix
	for _, c := range []struct {
		prefixes []netip.Prefix
		want     string
	}{
		{[]netip.Prefix{p("0.0.0.0/0")}, "0.0.0.1"},
		{[]netip.Prefix{p("10.1.0.0/24")}, "10.1.0.1"},
		{[]netip.Prefix{p("10.1.0.7/32")}, "10.1.0.7"},
		{[]netip.Prefix{p("fd00::/64"), p("10.1.0.1/32")}, "10.1.0.1"},
		{[]netip.Prefix{p("10.1.0.2/32")}, ""},
		{[]netip.Prefix{p("fd00::/64")}, ""},
	} {
		got, ok := tn.routedBy(c.prefixes)
		if (c.want == "" && ok) || (c.want != "" && got.String() != c.want) {
			t.Errorf("%v: got %v %v, want %q", c.prefixes, got, ok, c.want)
		}
	}
}
