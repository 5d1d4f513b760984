package device

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/tun"
	"github.com/fips-go/fips-go/tun/memtun"
)

func TestTSOMaxSizeKnownMTUs(t *testing.T) {
	for _, tc := range []struct {
		mtu  int
		size int
		ok   bool
	}{
		{1420, 46*1348 - 1, true}, // 45 datagrams of 1452 in a message
		{1280, 50*1208 - 1, true}, // 49 of 1312
		{1500, 43*1428 - 1, true}, // 42 of 1532
		{1000, 64*928 - 1, true},  // 63 of 1032
		{9000, 0, false},          // 7 of 9032: 64 KiB is 7 segments already
		{576, 0, false},           // 64 datagrams would be 32 KiB of TCP
		{72, 0, false},            // no room for a TCP segment
	} {
		size, ok := tsoMaxSize(tc.mtu)
		if size != tc.size || ok != tc.ok {
			t.Errorf("MTU %d: got %d, %v; want %d, %v", tc.mtu, size, ok, tc.size, tc.ok)
		}
	}
}

// For every MTU: a super-packet the kernel's TCP builds under the size
// returned, at any MSS from the smallest to the largest the MTU allows
// and with any header reserve up to 1 KiB, seals into datagrams that one
// UDP_SEGMENT message carries; and where the default is kept, the
// default's super-packets fit one message already or shrinking them would
// cost more than tsoMinShrunk.
func TestTSOMaxSizeFitsOneMessage(t *testing.T) {
	for mtu := 68; mtu <= 65535; mtu++ {
		size, ok := tsoMaxSize(mtu)
		dgram := mtu + noise.TransportOverhead
		n := min(conn.GSOMaxSegments, conn.GSOMaxBytes/dgram)
		if !ok {
			if mss := mtu - tun.TCPMaxHeaders; mss > 0 && tun.LegacyGSOMax/mss > n && n*mss >= tsoMinShrunk {
				t.Fatalf("MTU %d: default kept although %d segments of %d exceed one message of %d", mtu, tun.LegacyGSOMax/mss, mss, n)
			}
			continue
		}
		if size <= 0 || size >= tun.LegacyGSOMax {
			t.Fatalf("MTU %d: size %d outside (0, 64 KiB)", mtu, size)
		}
		for mss := mtu - tun.TCPMaxHeaders; mss <= mtu-40; mss++ {
			for _, reserve := range []int{0, 1, 320, 1024} {
				segs := (size - reserve - 1) / mss
				if segs > n || segs*dgram > conn.GSOMaxBytes {
					t.Fatalf("MTU %d, MSS %d, reserve %d: %d segments, one message holds %d", mtu, mss, reserve, segs, n)
				}
			}
		}
	}
}

// sizedTUN is an in-memory TUN whose GSO maximum can be set, recording
// each setting; fail makes the next one fail.
type sizedTUN struct {
	*memtun.Device
	mu    sync.Mutex
	sizes []int
	fail  error
}

func (s *sizedTUN) SetGSOMaxSize(size int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		err := s.fail
		s.fail = nil
		return err
	}
	s.sizes = append(s.sizes, size)
	return nil
}

// take returns the settings since the last take; failNext arms fail.
func (s *sizedTUN) take(failNext error) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	got := s.sizes
	s.sizes, s.fail = nil, failNext
	return got
}

// By default the device leaves the TUN's GSO maximum to the kernel, at
// start and through MTU changes: the kernel holds forwarded packets to it
// too, and a gateway whose TUN had a smaller one read every forwarded
// super-packet as single packets.
func TestDeviceLeavesGSOMaxByDefault(t *testing.T) {
	td := &sizedTUN{Device: memtun.New("tso", 1420, 16)}
	d, err := New(td, membind.NewNetwork(membind.NetOptions{}).NewBind(netip.MustParseAddr("192.0.2.2")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, mtu := range []int{1420, 1280, 9000, 1420} {
		td.SetMTU(mtu)
		d.mtuChanged()
	}
	if got := td.take(nil); len(got) != 0 {
		t.Fatalf("GSO maximum set to %v without Options.sizeTSO", got)
	}
}

// With Options.sizeTSO the device sizes the TUN's super-packets at start and after each MTU
// change that calls for it, gives the kernel's default back when a new
// MTU needs none, asks nothing when the MTU did not change, and carries on
// (logging) when the TUN refuses.
func TestDeviceSizesTSO(t *testing.T) {
	td := &sizedTUN{Device: memtun.New("tso", 1420, 16)}
	var mu sync.Mutex
	var logged []string
	d, err := New(td, membind.NewNetwork(membind.NetOptions{}).NewBind(netip.MustParseAddr("192.0.2.1")), Options{
		sizeTSO: true,
		Logf: func(f string, a ...any) {
			mu.Lock()
			defer mu.Unlock()
			logged = append(logged, fmt.Sprintf(f, a...))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := td.take(nil); !slices.Equal(got, []int{46*1348 - 1}) {
		t.Fatalf("at start (MTU 1420): GSO maximum set to %v", got)
	}
	// SetMTU also sends the event the device acts on; calling mtuChanged
	// here as well makes the step synchronous (the second call finds the
	// MTU handled).
	step := func(mtu int, failNext error, want ...int) {
		t.Helper()
		td.take(failNext)
		td.SetMTU(mtu)
		d.mtuChanged()
		if got := td.take(nil); !slices.Equal(got, want) {
			t.Fatalf("MTU %d: GSO maximum set to %v, want %v", mtu, got, want)
		}
	}
	step(1420, nil)                   // unchanged: nothing asked
	step(9000, nil, tun.LegacyGSOMax) // the default back
	step(576, nil)                    // the default already
	step(1280, nil, 50*1208-1)
	step(1420, errors.New("operation not permitted")) // refused: logged
	mu.Lock()
	if !slices.ContainsFunc(logged, func(l string) bool {
		return strings.Contains(l, "MTU 1420: the TUN's GSO maximum is not 62007: operation not permitted")
	}) {
		t.Fatalf("refusal not logged: %q", logged)
	}
	mu.Unlock()
	step(9000, nil, tun.LegacyGSOMax) // 1280's size was still in place
	step(1420, nil, 46*1348-1)
}
