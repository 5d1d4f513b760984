package device

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	wgtun "golang.zx2c4.com/wireguard/tun"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
	"github.com/fips-go/fips-go/tun"
	"github.com/fips-go/fips-go/tun/memtun"
)

// faultyTUN is an in-memory TUN whose Read first consults fault: a non-nil
// error (or a panic) from it is what that Read returns; nil reads through.
type faultyTUN struct {
	*memtun.Device
	fault func(call int) error
	mu    sync.Mutex // guards calls
	calls int
}

func (f *faultyTUN) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	f.mu.Lock()
	f.calls++
	call := f.calls
	f.mu.Unlock()
	if err := f.fault(call); err != nil {
		return 0, err
	}
	return f.Device.Read(bufs, sizes, offset)
}

func (f *faultyTUN) readCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

var _ tun.Device = (*faultyTUN)(nil)

// faultyBind is an in-memory bind whose receive functions return err for
// their first limit calls, then read through.
type faultyBind struct {
	*membind.Bind
	err   error
	limit atomic.Int64
	calls atomic.Int64
}

func (b *faultyBind) Open(port uint16) ([]conn.ReceiveFunc, uint16, error) {
	fns, actual, err := b.Bind.Open(port)
	for i, fn := range fns {
		fns[i] = func(bufs [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
			if b.calls.Add(1) <= b.limit.Load() {
				return 0, b.err
			}
			return fn(bufs, sizes, eps)
		}
	}
	return fns, actual, err
}

var _ conn.Bind = (*faultyBind)(nil)

// faultyPair is memPair with a's TUN and b's bind replaced.
func faultyPair(t *testing.T, ta tun.Device, wrapB func(*membind.Bind) conn.Bind) (a, b *node) {
	t.Helper()
	leakcheck.Check(t)
	netw := membind.NewNetwork(membind.NetOptions{})
	hostA, hostB := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	bb := conn.Bind(netw.NewBind(hostB))
	if wrapB != nil {
		bb = wrapB(netw.NewBind(hostB))
	}
	a = newNode(t, ta, netw.NewBind(hostA), addrA, hostA, Options{Workers: 2})
	b = newNode(t, memtun.New("b", 1420, 4096), bb, addrB, hostB, Options{Workers: 2})
	link(t, a, b)
	return a, b
}

// A user's flow can make wireguard-go's TUN fail reads (a tiny MSS yields
// more segments than a batch holds): that must cost the flow its packets,
// not the whole VPN.
func TestTUNReadErrorsDoNotStopTheDevice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const failures = 1000
		ta := &faultyTUN{Device: memtun.New("a", 1420, 4096), fault: func(call int) error {
			if call <= failures {
				return fmt.Errorf("reading: %w", wgtun.ErrTooManySegments)
			}
			return nil
		}}
		a, b := faultyPair(t, ta, nil)
		for i := range 3 {
			if err := ta.Inject(udpPacket(addrA, addrB, uint32(i), 100)); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 {
			next(t, b.tun, 10*time.Minute)
		}
		if err := a.dev.Err(); err != nil {
			t.Fatalf("device stopped: %v", err)
		}
		if c := counter(a.dev.Status(), "tx_tun_read_errors"); c != failures {
			t.Fatalf("tx_tun_read_errors = %d, want %d", c, failures)
		}
	})
}

// A Read that panics every time (the tun package recovers it and says so)
// is a bug that re-reading cannot fix: the device must stop with the error
// instead of spinning a core.
func TestTUNReadPanicsStopTheDevice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		leakcheck.Check(t)
		ta := &faultyTUN{Device: memtun.New("a", 1420, 64), fault: func(call int) error {
			if call > 100000 {
				return tun.ErrGone // a guard, so that a spinning reader ends too
			}
			return fmt.Errorf("%w: slice bounds out of range", tun.ErrReadPanicked)
		}}
		var logs atomic.Int64
		a := newNode(t, ta, membind.NewNetwork(membind.NetOptions{}).NewBind(netip.MustParseAddr("192.0.2.1")), addrA, addrA,
			Options{Logf: func(string, ...any) { logs.Add(1) }})
		<-a.dev.Done()
		if err := a.dev.Err(); !errors.Is(err, tun.ErrReadPanicked) {
			t.Fatalf("device stopped with %v, want the panic", err)
		}
		if n := ta.readCalls(); n > maxReadPanics {
			t.Fatalf("Read called %d times, want at most %d", n, maxReadPanics)
		}
		if c := counter(a.dev.Status(), "tx_tun_read_panics"); c != maxReadPanics {
			t.Fatalf("tx_tun_read_panics = %d, want %d", c, maxReadPanics)
		}
		if n := logs.Load(); n > 2 {
			t.Fatalf("%d log lines for one failure, want at most 2 (the panic, the stop)", n)
		}
	})
}

func TestTUNClosedStopsTheDevice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		leakcheck.Check(t)
		ta := &faultyTUN{Device: memtun.New("a", 1420, 64), fault: func(int) error { return fmt.Errorf("read: %w", tun.ErrGone) }}
		// New, not newNode: the reader may stop the device before a
		// configuration could be applied, and Apply then (rightly) fails.
		dev, err := New(ta, membind.NewNetwork(membind.NetOptions{}).NewBind(netip.MustParseAddr("192.0.2.1")), Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dev.Close() })
		<-dev.Done()
		if err := dev.Err(); !errors.Is(err, tun.ErrGone) {
			t.Fatalf("device stopped with %v, want tun.ErrGone", err)
		}
		if n := ta.readCalls(); n != 1 {
			t.Fatalf("Read called %d times after the TUN closed, want 1", n)
		}
	})
}

// A socket error that persists (here: every read fails) must not spin the
// receiver: it backs off, and reads on once the socket recovers.
func TestReceiverBacksOffOnPersistentErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fb *faultyBind
		a, b := faultyPair(t, memtun.New("a", 1420, 4096), func(mb *membind.Bind) conn.Bind {
			fb = &faultyBind{Bind: mb, err: errors.New("recvmmsg: no buffer space")}
			fb.limit.Store(100000)
			return fb
		})
		time.Sleep(time.Second)
		// 0, 1, 2, 4, ..., 64 ms, then 100 ms apart: 17 reads in the first second.
		if n := fb.calls.Load(); n > 20 {
			t.Fatalf("receiver read %d times in 1 s of persistent errors, want about 17", n)
		}
		fb.limit.Store(fb.calls.Load() + 100) // recovers after another 100 failures
		if err := a.tun.(*memtun.Device).Inject(udpPacket(addrA, addrB, 1, 100)); err != nil {
			t.Fatal(err)
		}
		next(t, b.tun, 10*time.Minute)
		if c := counter(b.dev.Status(), "rx_receive_errors"); c < 100 {
			t.Fatalf("rx_receive_errors = %d, want at least 100", c)
		}
	})
}
