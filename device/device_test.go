package device

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
	"github.com/fips-go/fips-go/tun"
	"github.com/fips-go/fips-go/tun/memtun"
)

var (
	addrA = netip.MustParseAddr("10.0.0.1")
	addrB = netip.MustParseAddr("10.0.0.2")
)

type node struct {
	dev  *Device
	tun  tun.Device
	bind conn.Bind
	key  noise.PrivateKey
	addr netip.Addr
	ep   netip.AddrPort // where the others reach it
}

func newNode(t testing.TB, td tun.Device, b conn.Bind, addr netip.Addr, host netip.Addr, opts Options) *node {
	t.Helper()
	key, err := noise.GeneratePrivateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(td, b, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if err := d.Apply(&Config{PrivateKey: &key}); err != nil {
		t.Fatal(err)
	}
	return &node{dev: d, tun: td, bind: b, key: key, addr: addr, ep: netip.AddrPortFrom(host, d.Status().ListenPort)}
}

// link makes a and b peers of each other; only a knows b's endpoint, so b
// must learn a's from the handshake (roaming).
func link(t testing.TB, a, b *node) {
	t.Helper()
	ep := b.ep
	if err := a.dev.Apply(&Config{Peers: []PeerConfig{{
		PublicKey:  b.key.PublicKey(),
		Endpoint:   &ep,
		AllowedIPs: []AllowedIPChange{{Prefix: netip.PrefixFrom(b.addr, 32)}},
	}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.dev.Apply(&Config{Peers: []PeerConfig{{
		PublicKey:  a.key.PublicKey(),
		AllowedIPs: []AllowedIPChange{{Prefix: netip.PrefixFrom(a.addr, 32)}},
	}}}); err != nil {
		t.Fatal(err)
	}
}

func memPair(t testing.TB, nopts membind.NetOptions) (a, b *node) {
	t.Helper()
	return memPairOn(t, membind.NewNetwork(nopts))
}

// memPairOn is memPair on a network the caller keeps, to add other binds.
func memPairOn(t testing.TB, netw *membind.Network) (a, b *node) {
	t.Helper()
	leakcheck.Check(t)
	hostA, hostB := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	a = newNode(t, memtun.New("a", 1420, 4096), netw.NewBind(hostA), addrA, hostA, Options{})
	b = newNode(t, memtun.New("b", 1420, 4096), netw.NewBind(hostB), addrB, hostB, Options{})
	link(t, a, b)
	return a, b
}

func udpPacket(src, dst netip.Addr, seq uint32, size int) []byte {
	payload := make([]byte, size)
	binary.BigEndian.PutUint32(payload, seq)
	return memtun.BuildUDPv4(netip.AddrPortFrom(src, 4000), netip.AddrPortFrom(dst, 5000), payload)
}

func next(t testing.TB, d tun.Device, wait time.Duration) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	pkt, err := d.(*memtun.Device).Next(ctx)
	if err != nil {
		t.Fatalf("no packet came out of the tunnel: %v", err)
	}
	return pkt
}

func TestHandshakeAndDataBothWays(t *testing.T) {
	a, b := memPair(t, membind.NetOptions{})
	pkt := udpPacket(addrA, addrB, 1, 100)
	if err := a.tun.(*memtun.Device).Inject(pkt); err != nil {
		t.Fatal(err)
	}
	got := next(t, b.tun, 5*time.Second)
	if string(got) != string(pkt) {
		t.Fatalf("packet changed in transit:\n got %x\nwant %x", got, pkt)
	}
	// b learned a's endpoint from the handshake and can answer.
	back := udpPacket(addrB, addrA, 2, 1300)
	if err := b.tun.(*memtun.Device).Inject(back); err != nil {
		t.Fatal(err)
	}
	if got := next(t, a.tun, 5*time.Second); string(got) != string(back) {
		t.Fatal("reply changed in transit")
	}
	sa, sb := a.dev.Status(), b.dev.Status()
	if sa.Peers[0].LastHandshake.IsZero() || sb.Peers[0].LastHandshake.IsZero() {
		t.Fatalf("handshake not recorded: a=%v b=%v", sa.Peers[0].LastHandshake, sb.Peers[0].LastHandshake)
	}
	if sb.Peers[0].Endpoint != a.ep {
		t.Fatalf("b's endpoint for a is %v, want %v (learned from the handshake)", sb.Peers[0].Endpoint, a.ep)
	}
	// Transfer counts datagrams as sent, handshakes included (as wireguard-go
	// and the kernel do): initiation 148, response 92, and data padded to 16
	// plus 32 bytes of header and tag: 128 -> 160, 1328 -> 1360.
	// A sender counts a datagram once its send returns, which on a loaded
	// machine can be after the peer has already received it.
	eventually(t, 5*time.Second, "transfer counters 308/1452 and 1452/308", func() bool {
		sa, sb = a.dev.Status(), b.dev.Status()
		a, b := sa.Peers[0], sb.Peers[0]
		return a.TxBytes == 148+160 && a.RxBytes == 92+1360 && b.TxBytes == 92+1360 && b.RxBytes == 148+160
	})
	if c := counter(sa, "handshakes_completed"); c != 1 {
		t.Fatalf("a completed %d handshakes, want 1", c)
	}
}

func counter(st Status, name string) uint64 {
	for _, c := range st.Counters {
		if c.Name == name {
			return c.Value
		}
	}
	return 0
}

func TestNoRouteAndBadSourceAreDroppedAndCounted(t *testing.T) {
	a, b := memPair(t, membind.NetOptions{})
	// Nobody owns 10.9.9.9.
	if err := a.tun.(*memtun.Device).Inject(udpPacket(addrA, netip.MustParseAddr("10.9.9.9"), 1, 10)); err != nil {
		t.Fatal(err)
	}
	// Establish the session, then have a send a packet whose inner source
	// b does not allow for a.
	a.tun.(*memtun.Device).Inject(udpPacket(addrA, addrB, 1, 10))
	next(t, b.tun, 5*time.Second)
	spoofed := udpPacket(netip.MustParseAddr("10.7.7.7"), addrB, 2, 10)
	a.tun.(*memtun.Device).Inject(spoofed)
	a.tun.(*memtun.Device).Inject(udpPacket(addrA, addrB, 3, 10))
	got := next(t, b.tun, 5*time.Second)
	if binary.BigEndian.Uint32(got[28:]) != 3 {
		t.Fatalf("spoofed packet was delivered")
	}
	if c := counter(a.dev.Status(), "tx_drop_no_route"); c != 1 {
		t.Fatalf("tx_drop_no_route = %d, want 1", c)
	}
	if c := counter(b.dev.Status(), "rx_drop_source_not_allowed"); c != 1 {
		t.Fatalf("rx_drop_source_not_allowed = %d, want 1", c)
	}
}

func TestGarbageDatagramsAreCounted(t *testing.T) {
	leakcheck.Check(t)
	netw := membind.NewNetwork(membind.NetOptions{})
	host := netip.MustParseAddr("192.0.2.1")
	a := newNode(t, memtun.New("a", 1420, 64), netw.NewBind(host), addrA, host, Options{})
	attacker := netw.NewBind(netip.MustParseAddr("192.0.2.66"))
	if _, _, err := attacker.Open(0); err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	msgs := [][]byte{
		{},                    // empty
		{9, 0, 0, 0, 1, 2, 3}, // unknown type
		make([]byte, 40),      // type 0
		append([]byte{4, 0, 0, 0}, make([]byte, 40)...),                     // transport to index 0
		append([]byte{1, 0, 0, 0}, make([]byte, 20)...),                     // short initiation
		append([]byte{1, 0, 0, 0}, make([]byte, noise.InitiationSize-4)...), // bad MAC1
	}
	if err := attacker.Send(msgs, conn.Endpoint{Dst: a.ep}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		st := a.dev.Status()
		if counter(st, "rx_drop_garbage") == 4 && counter(st, "rx_drop_unknown_index") == 1 && counter(st, "rx_drop_handshake_bad_mac") == 1 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	st := a.dev.Status()
	t.Fatalf("garbage=%d unknown_index=%d bad_mac=%d; want 4, 1, 1",
		counter(st, "rx_drop_garbage"), counter(st, "rx_drop_unknown_index"), counter(st, "rx_drop_handshake_bad_mac"))
}
