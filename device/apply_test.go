package device

import (
	"errors"
	"net/netip"
	"sync"
	"testing"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
	"github.com/fips-go/fips-go/tun/memtun"
)

// failingBind is a membind whose SetMark and Open fail on demand.
type failingBind struct {
	*membind.Bind
	mu        sync.Mutex
	markErr   error
	openFails map[uint16]bool // ports that cannot be bound
}

func (b *failingBind) SetMark(m uint32) error {
	b.mu.Lock()
	err := b.markErr
	b.mu.Unlock()
	if err != nil {
		return err
	}
	return b.Bind.SetMark(m)
}

func (b *failingBind) Open(port uint16) ([]conn.ReceiveFunc, uint16, error) {
	b.mu.Lock()
	fail := b.openFails[port]
	b.mu.Unlock()
	if fail {
		return nil, 0, errors.New("address in use")
	}
	return b.Bind.Open(port)
}

func (b *failingBind) failOpen(ports ...uint16) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.openFails = make(map[uint16]bool)
	for _, p := range ports {
		b.openFails[p] = true
	}
}

func newFailingDevice(t *testing.T) (*Device, *failingBind) {
	t.Helper()
	leakcheck.Check(t)
	netw := membind.NewNetwork(membind.NetOptions{})
	b := &failingBind{Bind: netw.NewBind(netip.MustParseAddr("192.0.2.1"))}
	d, err := New(memtun.New("f", 1420, 16), b, Options{ListenPort: 4000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, b
}

// A fwmark the socket refuses fails the request and changes nothing, as in
// wireguard-go (issue 8: it was logged and Apply reported success, leaving
// the tunnel's own traffic free to loop into the tunnel).
func TestFailedFwmarkFailsTheRequest(t *testing.T) {
	d, b := newFailingDevice(t)
	b.markErr = errors.New("operation not permitted")
	mark, port := uint32(51820), uint16(4001)
	err := d.Apply(&Config{FwMark: &mark, ListenPort: &port})
	if err == nil {
		t.Fatal("Apply with a refused fwmark succeeded")
	}
	st := d.Status()
	if st.FwMark != 0 || st.ListenPort != 4000 {
		t.Fatalf("after the failed request: fwmark %d, port %d; want 0 and 4000 unchanged", st.FwMark, st.ListenPort)
	}
}

// A listen port that cannot be bound fails the request and leaves the old
// port (and fwmark) in place.
func TestFailedRebindRestoresTheOldPort(t *testing.T) {
	d, b := newFailingDevice(t)
	b.failOpen(4001)
	mark, port := uint32(7), uint16(4001)
	err := d.Apply(&Config{FwMark: &mark, ListenPort: &port})
	if !errors.Is(err, ErrPortInUse) || errors.Is(err, ErrNoSocket) {
		t.Fatalf("Apply: %v; want ErrPortInUse, not ErrNoSocket", err)
	}
	if st := d.Status(); st.ListenPort != 4000 || st.FwMark != 0 {
		t.Fatalf("port %d, fwmark %d after the failed rebind; want 4000 and 0", st.ListenPort, st.FwMark)
	}
	if b.Mark() != 0 {
		t.Fatalf("the bind keeps fwmark %d from the failed request", b.Mark())
	}
}

// When neither the new nor the old port can be bound, the error says the
// device is left without a socket, and the status shows no port, instead of
// reporting the old port as if nothing had changed.
func TestRebindThatLosesTheSocketSaysSo(t *testing.T) {
	d, b := newFailingDevice(t)
	b.failOpen(4001, 4000)
	port := uint16(4001)
	err := d.Apply(&Config{ListenPort: &port})
	if !errors.Is(err, ErrNoSocket) {
		t.Fatalf("Apply: %v; want an error wrapping ErrNoSocket", err)
	}
	if st := d.Status(); st.ListenPort != 0 {
		t.Fatalf("status shows port %d with no socket open", st.ListenPort)
	}
	// A later request that can bind recovers.
	b.failOpen()
	if err := d.Apply(&Config{ListenPort: &port}); err != nil {
		t.Fatal(err)
	}
	if st := d.Status(); st.ListenPort != 4001 {
		t.Fatalf("port %d after recovering, want 4001", st.ListenPort)
	}
}

// PeerFor answers as the device routes: the longest of the peers' allowed
// prefixes holding the address, IPv4-mapped addresses as IPv4, and no peer
// once its prefix is removed.
func TestPeerFor(t *testing.T) {
	netw := membind.NewNetwork(membind.NetOptions{})
	host := netip.MustParseAddr("192.0.2.1")
	n := newNode(t, memtun.New("a", 1420, 64), netw.NewBind(host), addrA, host, Options{})
	var wide, narrow noise.PublicKey
	wide[0], narrow[0] = 1, 2
	p := func(s string) netip.Prefix { return netip.MustParsePrefix(s) }
	if err := n.dev.Apply(&Config{Peers: []PeerConfig{
		{PublicKey: wide, AllowedIPs: []AllowedIPChange{{Prefix: p("10.0.0.0/24")}, {Prefix: p("fd00::/64")}}},
		{PublicKey: narrow, AllowedIPs: []AllowedIPChange{{Prefix: p("10.0.0.7/32")}}},
	}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr string
		want noise.PublicKey
		ok   bool
	}{{"10.0.0.1", wide, true}, {"10.0.0.7", narrow, true}, {"::ffff:10.0.0.7", narrow, true}, {"fd00::5", wide, true}, {"10.0.1.1", noise.PublicKey{}, false}} {
		if got, ok := n.dev.PeerFor(netip.MustParseAddr(tc.addr)); got != tc.want || ok != tc.ok {
			t.Errorf("PeerFor(%s) = %v, %v; want %v, %v", tc.addr, got, ok, tc.want, tc.ok)
		}
	}
	if err := n.dev.Apply(&Config{Peers: []PeerConfig{{PublicKey: narrow, AllowedIPs: []AllowedIPChange{{Prefix: p("10.0.0.7/32"), Remove: true}}}}}); err != nil {
		t.Fatal(err)
	}
	if got, ok := n.dev.PeerFor(netip.MustParseAddr("10.0.0.7")); !ok || got != wide {
		t.Errorf("after the /32 went: PeerFor(10.0.0.7) = %v, %v; want the /24's peer", got, ok)
	}
}

// BenchmarkPeerFor: the exit asks it once per new flow, with a gateway's
// worth of peers configured (10,000, one /32 each).
func BenchmarkPeerFor(b *testing.B) {
	netw := membind.NewNetwork(membind.NetOptions{})
	host := netip.MustParseAddr("192.0.2.1")
	n := newNode(b, memtun.New("a", 1420, 64), netw.NewBind(host), addrA, host, Options{})
	const peers = 10000
	cfg := &Config{}
	for i := range peers {
		var k noise.PublicKey
		k[0], k[1], k[2] = 7, byte(i>>8), byte(i)
		a := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
		cfg.Peers = append(cfg.Peers, PeerConfig{PublicKey: k, AllowedIPs: []AllowedIPChange{{Prefix: netip.PrefixFrom(a, 32)}}})
	}
	if err := n.dev.Apply(cfg); err != nil {
		b.Fatal(err)
	}
	a := netip.AddrFrom4([4]byte{10, 1, 20, 33})
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := n.dev.PeerFor(a); !ok {
			b.Fatal("no peer")
		}
	}
}
