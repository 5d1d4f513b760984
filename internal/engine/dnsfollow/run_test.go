package dnsfollow_test

import (
	"context"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/device/timers"
	"github.com/fips-go/fips-go/internal/engine/dnsfollow"
	"github.com/fips-go/fips-go/internal/testkit/devicetest"
	"github.com/fips-go/fips-go/tun/memtun"
)

var addrA, addrB = netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")

// fastRetry retransmits unanswered initiations every 300 ms instead of 5 s.
var fastRetry = device.Options{Timers: timers.Params{RekeyTimeout: 300 * time.Millisecond}}

// fakeDNS is a resolver the test controls, counting lookups per host.
type fakeDNS struct {
	mu    sync.Mutex
	addr  netip.Addr
	calls atomic.Int32
}

func (f *fakeDNS) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	return []netip.Addr{f.addr}, nil
}

type setup struct {
	a, b   *device.Device
	ta, tb *memtun.Device
	keyB   noise.PublicKey
	portB  uint16
}

// newSetup: a's config says b is at 192.0.2.2 (as the name resolved when
// the file was read), but b now lives at 192.0.2.3.
func newSetup(t *testing.T) *setup {
	p := devicetest.NewPair(t, devicetest.PairOptions{A: fastRetry, B: fastRetry, TUNQueue: 64,
		AddrA: addrA, AddrB: addrB, HostB: netip.MustParseAddr("192.0.2.3"), StaleHostB: netip.MustParseAddr("192.0.2.2")})
	return &setup{a: p.A, b: p.B, ta: p.MemA(t), tb: p.MemB(t), keyB: p.KeyB.PublicKey(), portB: p.EndpointB.Port()}
}

func (s *setup) run(t *testing.T, dns *fakeDNS) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		dnsfollow.Run(ctx, s.a, dnsfollow.Static(map[noise.PublicKey]string{s.keyB: "b.example:" + itoa(s.portB)}), dnsfollow.Options{
			Resolve: dns.resolve, Tick: 50 * time.Millisecond, MinInterval: time.Second, FailAfter: 300 * time.Millisecond,
			Logf: t.Logf,
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func itoa(p uint16) string { return strconv.Itoa(int(p)) }

// A peer whose name moved: the unanswered handshake makes the follower
// resolve the name, the new address is applied, and the packet waiting
// for the handshake arrives, without a restart.
func TestNameMovesHandshakeFollows(t *testing.T) {
	s := newSetup(t)
	dns := &fakeDNS{addr: netip.MustParseAddr("192.0.2.3")}
	s.run(t, dns)
	pkt := memtun.BuildUDPv4(netip.AddrPortFrom(addrA, 4000), netip.AddrPortFrom(addrB, 5000), []byte("hello"))
	if err := s.ta.Inject(pkt); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := s.tb.Next(ctx)
	if err != nil || string(got) != string(pkt) {
		t.Fatalf("the packet did not arrive after the name moved: %v", err)
	}
	ep := s.a.Status().Peers[0].Endpoint
	if want := netip.AddrPortFrom(netip.MustParseAddr("192.0.2.3"), s.portB); ep != want {
		t.Fatalf("endpoint %v, want %v", ep, want)
	}
	if n := dns.calls.Load(); n != 1 {
		t.Errorf("%d lookups, want 1", n)
	}
}

// A name that keeps pointing nowhere is looked up at most once per
// MinInterval (1 s here), however often the handshake fails (every 300 ms).
// Only the upper bound is asserted: a loaded machine can make the follower
// look fewer times, never more. When lookups are due again is
// TestDueRateLimitAndCoalescing's, on a fake clock.
func TestRateLimitHoldsOnADevice(t *testing.T) {
	s := newSetup(t)
	dns := &fakeDNS{addr: netip.MustParseAddr("192.0.2.99")}
	s.run(t, dns)
	pkt := memtun.BuildUDPv4(netip.AddrPortFrom(addrA, 4000), netip.AddrPortFrom(addrB, 5000), []byte("hello"))
	s.ta.Inject(pkt)
	start := time.Now()
	time.Sleep(3500 * time.Millisecond)
	n := dns.calls.Load()
	if max := int32(time.Since(start)/time.Second) + 1; n < 1 || n > max {
		t.Errorf("%d lookups in %v, want between 1 and %d", n, time.Since(start).Round(time.Millisecond), max)
	}
}

// statsDevice is a Device with no peers that counts how often Run looks.
type statsDevice struct{ looks atomic.Int64 }

func (d *statsDevice) Stats(int) device.Stats {
	d.looks.Add(1)
	return device.Stats{}
}
func (d *statsDevice) Apply(*device.Config) error { return nil }

// With Options.Changed, Run does not tick while the table is empty (a
// daemon configured with addresses only), looks at once when a name is
// set, ticks while there are names, and stops again once they are gone.
func TestRunSleepsWithoutNames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		table := dnsfollow.NewTable()
		var reads atomic.Int64
		names := func() map[noise.PublicKey]string {
			reads.Add(1)
			return table.Snapshot()
		}
		dev := &statsDevice{}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			dnsfollow.Run(ctx, dev, names, dnsfollow.Options{Tick: time.Second, Changed: table.Changed(),
				Resolve: func(context.Context, string) ([]netip.Addr, error) { return nil, nil }})
		}()
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := reads.Load(); got != 1 {
			t.Fatalf("names read %d times in an empty minute, want 1 (the first tick)", got)
		}
		var key noise.PublicKey
		key[0] = 1
		if err := table.Set(map[noise.PublicKey]string{key: "b.example:51820"}, false); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := reads.Load(); got != 2 || dev.looks.Load() != 1 {
			t.Fatalf("after Set: names read %d times, device looked at %d; want 2 and 1", got, dev.looks.Load())
		}
		time.Sleep(10*time.Second + time.Millisecond)
		synctest.Wait()
		if got := dev.looks.Load(); got != 11 {
			t.Fatalf("device looked at %d times after 10 ticks with a name, want 11", got)
		}
		if err := table.Set(nil, true); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		n := reads.Load()
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := reads.Load(); got != n {
			t.Fatalf("names read %d more times in a minute after the last name went", got-n)
		}
		cancel()
		<-done
	})
}
