package devicetest

import (
	"net/netip"
	"testing"

	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/tun"
	"github.com/fips-go/fips-go/tun/memtun"
)

// PairOptions configure NewPair; the zero value is two default devices
// with in-memory TUNs on a perfect in-memory network.
type PairOptions struct {
	// A and B are the devices' options.
	A, B device.Options
	// Net is the in-memory network between them: delay, loss, queue.
	Net membind.NetOptions
	// TunA and TunB are the devices' TUNs (a netstack, say); nil means a
	// memtun with MTU 1420 and a queue of TUNQueue packets. Each device
	// closes its TUN when it closes.
	TunA, TunB tun.Device
	// TUNQueue is the queue length of the memtuns made for nil TunA and
	// TunB; 0 means 4096.
	TUNQueue int
	// AddrA and AddrB are the tunnel addresses, each the other's allowed
	// IP (a /32 or /128); zero means 10.0.0.1 and 10.0.0.2.
	AddrA, AddrB netip.Addr
	// HostA and HostB are the devices' hosts on the network; zero means
	// 192.0.2.1 and 192.0.2.2.
	HostA, HostB netip.Addr
	// StaleHostB, if set, is the host A is told B lives at (with B's
	// port), as after B moved: a test of endpoint following.
	StaleHostB netip.Addr
}

// Pair is two devices that are each other's peer: A is configured with
// B's endpoint, B learns A's from the first handshake. Both close when the
// test ends.
type Pair struct {
	A, B         *device.Device
	TunA, TunB   tun.Device
	KeyA, KeyB   noise.PrivateKey
	Net          *membind.Network
	AddrA, AddrB netip.Addr // tunnel addresses
	EndpointA    netip.AddrPort
	EndpointB    netip.AddrPort // where B listens
}

// MemA and MemB are the pair's TUNs as memtuns; they fail t if the pair
// was made with TUNs of another kind.
func (p *Pair) MemA(t testing.TB) *memtun.Device { return mem(t, p.TunA) }

// MemB is MemA for B.
func (p *Pair) MemB(t testing.TB) *memtun.Device { return mem(t, p.TunB) }

func mem(t testing.TB, d tun.Device) *memtun.Device {
	t.Helper()
	m, ok := d.(*memtun.Device)
	if !ok {
		t.Fatalf("devicetest: TUN is a %T, not a memtun", d)
	}
	return m
}

// NewPair starts two devices on one in-memory network and makes them
// peers.
func NewPair(t testing.TB, o PairOptions) *Pair {
	t.Helper()
	orAddr := func(a netip.Addr, def string) netip.Addr {
		if a.IsValid() {
			return a
		}
		return netip.MustParseAddr(def)
	}
	queue := o.TUNQueue
	if queue == 0 {
		queue = 4096
	}
	p := &Pair{
		Net: membind.NewNetwork(o.Net), TunA: o.TunA, TunB: o.TunB,
		AddrA: orAddr(o.AddrA, "10.0.0.1"), AddrB: orAddr(o.AddrB, "10.0.0.2"),
	}
	if p.TunA == nil {
		p.TunA = memtun.New("a", 1420, queue)
	}
	if p.TunB == nil {
		p.TunB = memtun.New("b", 1420, queue)
	}
	hostA, hostB := orAddr(o.HostA, "192.0.2.1"), orAddr(o.HostB, "192.0.2.2")
	p.A, p.KeyA = New(t, p.TunA, p.Net.NewBind(hostA), o.A)
	p.B, p.KeyB = New(t, p.TunB, p.Net.NewBind(hostB), o.B)
	p.EndpointA = netip.AddrPortFrom(hostA, p.A.Status().ListenPort)
	p.EndpointB = netip.AddrPortFrom(hostB, p.B.Status().ListenPort)
	told := p.EndpointB
	if o.StaleHostB.IsValid() {
		told = netip.AddrPortFrom(o.StaleHostB, told.Port())
	}
	Peer(t, p.A, device.PeerConfig{PublicKey: p.KeyB.PublicKey(), Endpoint: &told,
		AllowedIPs: []device.AllowedIPChange{{Prefix: hostPrefix(p.AddrB)}}})
	Peer(t, p.B, device.PeerConfig{PublicKey: p.KeyA.PublicKey(),
		AllowedIPs: []device.AllowedIPChange{{Prefix: hostPrefix(p.AddrA)}}})
	return p
}

// Peer applies peer configurations to d, failing t on error.
func Peer(t testing.TB, d *device.Device, pcs ...device.PeerConfig) {
	t.Helper()
	if err := d.Apply(&device.Config{Peers: pcs}); err != nil {
		t.Fatal(err)
	}
}

func hostPrefix(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }
