package device

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/tun/memtun"
)

// garbageKind is one way a datagram can be wrong, with the counter that
// must count it.
type garbageKind struct {
	name    string
	counter string
	make    func(r *rand.Rand, liveIndex uint32) []byte
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func typed(r *rand.Rand, typ uint32, n int) []byte {
	b := randomBytes(r, n)
	binary.LittleEndian.PutUint32(b, typ)
	return b
}

var garbageKinds = []garbageKind{
	{"random bytes of a type that does not exist", "rx_drop_garbage", func(r *rand.Rand, _ uint32) []byte {
		b := randomBytes(r, 1+r.IntN(1400))
		if len(b) >= 4 {
			binary.LittleEndian.PutUint32(b, 5+r.Uint32N(1000))
		}
		return b
	}},
	{"initiation of the wrong length", "rx_drop_garbage", func(r *rand.Rand, _ uint32) []byte {
		return typed(r, noise.TypeInitiation, 4+r.IntN(noise.InitiationSize-4))
	}},
	{"response of the wrong length", "rx_drop_garbage", func(r *rand.Rand, _ uint32) []byte {
		return typed(r, noise.TypeResponse, noise.ResponseSize+1+r.IntN(100))
	}},
	{"cookie reply of the wrong length", "rx_drop_garbage", func(r *rand.Rand, _ uint32) []byte {
		return typed(r, noise.TypeCookieReply, 4+r.IntN(noise.CookieReplySize-4))
	}},
	{"transport shorter than header and tag", "rx_drop_garbage", func(r *rand.Rand, _ uint32) []byte {
		return typed(r, noise.TypeTransport, 4+r.IntN(noise.TransportOverhead-4))
	}},
	{"initiation with a bad MAC1", "rx_drop_handshake_bad_mac", func(r *rand.Rand, _ uint32) []byte {
		return typed(r, noise.TypeInitiation, noise.InitiationSize)
	}},
	{"response with a bad MAC1", "rx_drop_handshake_bad_mac", func(r *rand.Rand, _ uint32) []byte {
		return typed(r, noise.TypeResponse, noise.ResponseSize)
	}},
	{"transport to a random receiver index", "rx_drop_unknown_index", func(r *rand.Rand, live uint32) []byte {
		b := typed(r, noise.TypeTransport, noise.TransportOverhead+r.IntN(1400))
		idx := r.Uint32()
		for idx == live {
			idx = r.Uint32()
		}
		binary.LittleEndian.PutUint32(b[4:], idx)
		return b
	}},
	{"transport to the live session with garbage ciphertext", "rx_drop_decrypt_failed", func(r *rand.Rand, live uint32) []byte {
		b := typed(r, noise.TypeTransport, noise.TransportOverhead+r.IntN(1400))
		binary.LittleEndian.PutUint32(b[4:], live)
		return b
	}},
}

// Garbage on the wire, of every kind, while the tunnel carries traffic:
// every datagram is dropped and counted by its reason, and the traffic
// goes on (issue 13).
func TestGarbageOnTheWireIsCountedByReason(t *testing.T) {
	netw := membind.NewNetwork(membind.NetOptions{QueueLen: 8192})
	a, b := memPairOn(t, netw)
	ta := a.tun.(*memtun.Device)
	ta.Inject(udpPacket(addrA, addrB, 1, 100))
	next(t, b.tun, 5*time.Second)
	// The index b gave the live session: what a's transport messages carry.
	pa := peerOf(t, b, a.key.PublicKey())
	pa.mu.Lock()
	live := pa.kps.Current.LocalIndex
	if pa.kps.Next != nil {
		live = pa.kps.Next.LocalIndex
	}
	pa.mu.Unlock()

	r := rand.New(rand.NewPCG(1, 2))
	before := b.dev.Status()
	want := map[string]uint64{}
	const per = 500
	src := netw.NewBind(netip.MustParseAddr("192.0.2.66"))
	if _, _, err := src.Open(0); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, k := range garbageKinds {
		for range per {
			if err := src.Send([][]byte{k.make(r, live)}, conn.Endpoint{Dst: b.ep}); err != nil {
				t.Fatal(err)
			}
		}
		want[k.counter] += per
		// Traffic still flows between the kinds.
		seq := uint32(1000 + len(want))
		ta.Inject(udpPacket(addrA, addrB, seq, 200))
		for {
			got := next(t, b.tun, 5*time.Second)
			if binary.BigEndian.Uint32(got[28:]) == seq {
				break
			}
		}
	}
	eventually(t, 10*time.Second, "every garbage datagram counted", func() bool {
		st := b.dev.Status()
		for name, n := range want {
			if counter(st, name)-counter(before, name) < n {
				return false
			}
		}
		return true
	})
	st := b.dev.Status()
	for name, n := range want {
		if got := counter(st, name) - counter(before, name); got != n {
			t.Errorf("%s grew by %d, want %d", name, got, n)
		}
	}
}

// Dropping garbage allocates nothing: a flood of it costs no GC work.
func TestGarbageAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	_, b := memPair(t, membind.NetOptions{})
	r := rand.New(rand.NewPCG(3, 4))
	rb := b.dev.getBatch()
	defer func() {
		if rb != nil {
			rb.release()
		}
	}()
	// Kinds the receive goroutine drops itself; the rest need a session
	// and cross goroutines, which AllocsPerRun cannot tell apart.
	var msgs [][]byte
	for _, k := range garbageKinds[:len(garbageKinds)-1] {
		for range 4 {
			msgs = append(msgs, k.make(r, 0))
		}
	}
	ep := conn.Endpoint{Dst: netip.MustParseAddrPort("192.0.2.66:1")}
	allocs := testing.AllocsPerRun(200, func() {
		for i, m := range msgs {
			rb.sizes[i] = copy(rb.bufs[i], m)
			rb.eps[i] = ep
		}
		rb, _ = b.dev.routeInbound(rb, len(msgs))
	})
	if allocs != 0 {
		t.Fatalf("dropping a batch of %d garbage datagrams allocates %.1f times", len(msgs), allocs)
	}
}
