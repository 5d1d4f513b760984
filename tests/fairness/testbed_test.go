package fairness

import (
	"context"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/testkit/devicetest"
	"github.com/fips-go/fips-go/internal/tuning"
	"github.com/fips-go/fips-go/tun/memtun"
)

const (
	configured = 1000 // peers configured on the gateway
	active     = 100  // senders in each scenario
	packetSize = 1000 // bytes of every inner IPv4 packet
	// heavySpoke is the extra spoke that plays the heavy peer: a device
	// with more crypto workers, pool and TUN queue, so that it can send
	// 10x what a light spoke does. Spokes 0 to 99 are identical.
	heavySpoke = active
	spokes     = active + 1
)

var (
	gatewayAddr = netip.MustParseAddr("10.0.0.1")
	gatewayHost = netip.MustParseAddr("192.0.2.1")
	spokeHost   = netip.MustParseAddr("192.0.2.2")
)

// spokeAddr is peer i's tunnel address, 10.1.i>>8.i&255: the gateway's
// TUN reader finds the peer by it, and the inbound counter reads i back.
func spokeAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
}

// spokeIndex is spokeAddr's inverse on an IPv4 packet's source address,
// -1 for anything else.
func spokeIndex(pkt []byte) int {
	if len(pkt) < 20 || pkt[0]>>4 != 4 || pkt[12] != 10 || pkt[13] != 1 {
		return -1
	}
	return int(pkt[14])<<8 | int(pkt[15])
}

// spoke is one of the active peers: a device of its own.
type spoke struct {
	dev *device.Device
	tun *memtun.Device
	key noise.PrivateKey
}

// testbed is the gateway and its active spokes; the other configured
// peers are keys and addresses only, as idle peers on a real gateway are.
type testbed struct {
	netw   *membind.Network
	gw     *device.Device
	gwTun  *memtun.Device
	spokes []*spoke
	// in counts packets that reached the gateway's TUN by spoke; out
	// counts packets that reached spoke i's TUN.
	in, out [spokes]atomic.Uint64
}

// gatewayOptions are the defaults: what the benchmark is about.
var gatewayOptions = device.Options{}

// spokeOptions keep 100 devices cheap: one crypto worker and small pools
// each (the gateway, not the spokes, is what is measured).
var spokeOptions = sized(1, 4)

var heavyOptions = sized(10, 40)

func sized(workers, batches int) device.Options {
	o := device.Options{Workers: workers}
	tuning.SetDevice(&o, tuning.Device{BatchSize: 32, Batches: batches, SmallBatches: 16, HandshakeQueue: 16, StagingBuffers: 128})
	return o
}

func newTestbed(t testing.TB, ctx context.Context) *testbed {
	t.Helper()
	netw := membind.NewNetwork(membind.NetOptions{})
	tb := &testbed{netw: netw, gwTun: memtun.New("gateway", 1420, 0)}
	gwKey := devicetest.Key(t)
	tb.gw = devicetest.NewWithKey(t, tb.gwTun, netw.NewBind(gatewayHost), gwKey, gatewayOptions)
	gwEP := netip.AddrPortFrom(gatewayHost, tb.gw.Status().ListenPort)

	peers := make([]device.PeerConfig, configured)
	for i := range peers {
		key := devicetest.Key(t)
		ep := netip.AddrPortFrom(spokeHost, uint16(20000+i)) // idle peers: nobody there
		if i < spokes {
			s := &spoke{tun: memtun.New("spoke", 1420, 256), key: key}
			opts := spokeOptions
			if i == heavySpoke {
				s.tun, opts = memtun.New("heavy", 1420, 2560), heavyOptions
			}
			s.dev = devicetest.NewWithKey(t, s.tun, netw.NewBind(spokeHost), key, opts)
			ep = netip.AddrPortFrom(spokeHost, s.dev.Status().ListenPort)
			gwPub := gwKey.PublicKey()
			if err := s.dev.Apply(&device.Config{Peers: []device.PeerConfig{{
				PublicKey:  gwPub,
				Endpoint:   &gwEP,
				AllowedIPs: []device.AllowedIPChange{{Prefix: netip.MustParsePrefix("10.0.0.0/8")}},
			}}}); err != nil {
				t.Fatal(err)
			}
			tb.spokes = append(tb.spokes, s)
		}
		peers[i] = device.PeerConfig{
			PublicKey:  key.PublicKey(),
			Endpoint:   &ep,
			AllowedIPs: []device.AllowedIPChange{{Prefix: netip.PrefixFrom(spokeAddr(i), 32)}},
		}
	}
	if err := tb.gw.Apply(&device.Config{Peers: peers}); err != nil {
		t.Fatal(err)
	}
	if n := len(tb.gw.Status().Peers); n != configured {
		t.Fatalf("gateway has %d peers, want %d", n, configured)
	}
	tb.drain(ctx)
	tb.handshake(t)
	return tb
}

// drain counts what comes out of every TUN, so that no Write waits on a
// full queue.
func (tb *testbed) drain(ctx context.Context) {
	go func() {
		for {
			pkt, err := tb.gwTun.Next(ctx)
			if err != nil {
				return
			}
			if i := spokeIndex(pkt); i >= 0 && i < spokes {
				tb.in[i].Add(1)
			}
		}
	}()
	for i, s := range tb.spokes {
		go func() {
			for {
				if _, err := s.tun.Next(ctx); err != nil {
					return
				}
				tb.out[i].Add(1)
			}
		}()
	}
}

// handshake sends one packet each way per spoke and waits until all have
// arrived, so that the runs measure data, not handshakes.
func (tb *testbed) handshake(t testing.TB) {
	t.Helper()
	for i, s := range tb.spokes {
		if err := s.tun.Inject(packet(spokeAddr(i), gatewayAddr)); err != nil {
			t.Fatal(err)
		}
	}
	waitAll(t, tb.in[:])
	for i := range tb.spokes {
		if err := tb.gwTun.InjectContext(t.Context(), packet(gatewayAddr, spokeAddr(i))); err != nil {
			t.Fatal(err)
		}
	}
	waitAll(t, tb.out[:])
}

func waitAll(t testing.TB, counts []atomic.Uint64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for i := range counts {
		for counts[i].Load() == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("spoke %d: no packet through after a minute", i)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func packet(src, dst netip.Addr) []byte {
	payload := make([]byte, packetSize-28)
	return memtun.BuildUDPv4(netip.AddrPortFrom(src, 4000), netip.AddrPortFrom(dst, 5000), payload)
}

// snapshot reads counts.
func snapshot(counts *[spokes]atomic.Uint64) []uint64 {
	out := make([]uint64, spokes)
	for i := range counts {
		out[i] = counts[i].Load()
	}
	return out
}

// drops returns the gateway's drop counters and the in-memory network's
// queue drops (a full receive queue, as a full socket buffer), by name.
func (tb *testbed) drops() map[string]uint64 {
	m := map[string]uint64{"net_queue_drops": tb.netw.Stats().QueueDrops}
	for _, c := range tb.gw.Status().Counters {
		if strings.Contains(c.Name, "drop") {
			m[c.Name] = c.Value
		}
	}
	return m
}

// gatewaySent returns the bytes the gateway sent to each active spoke (what
// its send path gave each peer, before the spokes' own receive queues).
func (tb *testbed) gatewaySent() []uint64 {
	tx := map[noise.PublicKey]uint64{}
	for _, p := range tb.gw.Status().Peers {
		tx[p.PublicKey] = p.TxBytes
	}
	out := make([]uint64, spokes)
	for i, s := range tb.spokes {
		out[i] = tx[s.key.PublicKey()]
	}
	return out
}

// spokesSent returns the bytes each active spoke sent to the gateway.
func (tb *testbed) spokesSent() []uint64 {
	out := make([]uint64, spokes)
	for i, s := range tb.spokes {
		for _, p := range s.dev.Status().Peers {
			out[i] += p.TxBytes
		}
	}
	return out
}
