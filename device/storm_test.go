package device

import (
	"crypto/rand"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/tun/memtun"
)

// A restarted gateway meets every road warrior's initiation at once, far
// more than its handshake queue holds. Each must be answered at its first
// initiation: a cookie reply, or an initiation dropped at a full queue or
// socket, costs its peer Rekey-Timeout (5 s) before it tries again, which
// made a 10,000-peer storm take 11 s where its work took 2. The
// initiations worked on are all answered, so the device reads the storm in
// full and queues a backlog (ratelimit.Yield): none is dropped, none gets
// a cookie reply.
func TestRestartStormIsAnsweredAtFirstInitiation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const peers, first, wave = 1000, 40, 240
		netw := membind.NewNetwork(membind.NetOptions{QueueLen: 8192})
		host := netip.MustParseAddr("192.0.2.2")
		gw := newNode(t, memtun.New("g", 1420, 64), netw.NewBind(host), addrB, host, Options{handshakeQueue: 64})
		gen := noise.NewCookieGenerator(gw.key.PublicKey())
		var cfg Config
		msgs := make([][]byte, peers)
		srcs := make([]*membind.Bind, peers)
		for i := range peers {
			key, err := noise.GeneratePrivateKey(rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Peers = append(cfg.Peers, PeerConfig{
				PublicKey:  key.PublicKey(),
				AllowedIPs: []AllowedIPChange{{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)}), 32)}},
			})
			hs := noise.NewHandshake(noise.NewStatic(key), gw.key.PublicKey(), noise.PresharedKey{})
			m, err := hs.CreateInitiation(time.Now(), rand.Reader, uint32(i+1))
			if err != nil {
				t.Fatal(err)
			}
			msgs[i] = m.AppendTo(nil)
			gen.AddMACs(msgs[i], time.Now())
			srcs[i] = netw.NewBind(netip.AddrFrom4([4]byte{10, 99, byte(i >> 8), byte(i)}))
			if _, _, err := srcs[i].Open(0); err != nil {
				t.Fatal(err)
			}
			defer srcs[i].Close()
		}
		if err := gw.dev.Apply(&cfg); err != nil {
			t.Fatal(err)
		}
		send := func(from, to int) {
			for i := from; i < to; i++ {
				if err := srcs[i].Send([][]byte{msgs[i]}, conn.Endpoint{Dst: gw.ep}); err != nil {
					t.Fatal(err)
				}
			}
		}
		// The first few arrive as the queue fills; then waves of several
		// queues' worth.
		send(0, first)
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		for i := first; i < peers; i += wave {
			send(i, min(peers, i+wave))
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		st := gw.dev.Status()
		for name, want := range map[string]uint64{
			"handshake_responses_sent":     peers,
			"cookie_replies_sent":          0,
			"rx_drop_handshake_queue_full": 0,
		} {
			if got := counter(st, name); got != want {
				t.Errorf("%s = %d, want %d", name, got, want)
			}
		}
	})
}

// The anonymous queue holds base messages, deep ones only while asked to,
// and keeps no more than base buffers once its backlog is handled.
func TestHandshakeBacklogIsBounded(t *testing.T) {
	h := newHSQueue(4, 8)
	msg := make([]byte, noise.InitiationSize)
	put := func(deep bool) (n int) {
		for h.put(msg, conn.Endpoint{}, slotPlain, deep) {
			n++
		}
		return n
	}
	if n := put(false); n != 4 {
		t.Fatalf("took %d messages without a backlog, want 4", n)
	}
	if n := put(true); n != 4 {
		t.Fatalf("took %d more as a backlog, want 4 (8 in all)", n)
	}
	for len(h.q) > 0 {
		h.release(<-h.q)
	}
	if len(h.free) != 4 || h.extra.Load() != 0 {
		t.Fatalf("after the backlog: %d free buffers and %d extra, want 4 and 0", len(h.free), h.extra.Load())
	}
	if n := put(true); n != 8 {
		t.Fatalf("a second backlog took %d, want 8", n)
	}
}

// Handshake workers release buffers at once. However their releases
// interleave, a backlog once handled leaves base free buffers and its whole
// grow allowance: a buffer dropped at a full free list gives its count
// back (it once did not when two releases raced for the last free place,
// and the allowance shrank for good; this failed within a few hundred
// rounds then).
func TestHandshakeBacklogConcurrentRelease(t *testing.T) {
	msg := make([]byte, noise.InitiationSize)
	for round := range 5000 {
		h := newHSQueue(4, 8)
		for h.put(msg, conn.Endpoint{}, slotPlain, true) {
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case m := <-h.q:
						h.release(m)
					default:
						return
					}
				}
			}()
		}
		wg.Wait()
		if len(h.free) != 4 || h.extra.Load() != 0 {
			t.Fatalf("round %d: %d free buffers and %d extra, want 4 and 0", round, len(h.free), h.extra.Load())
		}
	}
}
