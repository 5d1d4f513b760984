package engine

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
	"github.com/fips-go/fips-go/ipc"
	"github.com/fips-go/fips-go/tun"
	"github.com/fips-go/fips-go/tun/memtun"
	"github.com/fips-go/fips-go/tun/netstack"
)

func TestListenPort(t *testing.T) {
	p := func(v uint16) *uint16 { return &v }
	for _, c := range []struct {
		asked      uint16
		configured *uint16
		want       uint16
	}{
		{0, nil, 0},
		{0, p(0), 0},
		{0, p(51820), 51820},
		{41001, p(0), 41001},
		{41001, p(51820), 41001},
		{41001, nil, 41001},
	} {
		if got := ListenPort(c.asked, c.configured); got != c.want {
			t.Errorf("ListenPort(%d, %v) = %d, want %d", c.asked, c.configured, got, c.want)
		}
	}
}

func quick(t *testing.T) *ipc.QuickConfig {
	t.Helper()
	k := noise.PrivateKey{1}
	zero := uint16(0)
	return &ipc.QuickConfig{
		Config:    &device.Config{PrivateKey: &k, ListenPort: &zero},
		Addresses: []netip.Prefix{netip.MustParsePrefix("10.0.0.2/24")},
	}
}

// A failed start closes the TUN it was given, so that no caller leaks it.
func TestStartClosesTUNOnError(t *testing.T) {
	m := memtun.New("t0", 1420, 16)
	q := quick(t)
	q.Config.Peers = []device.PeerConfig{{PublicKey: noise.PublicKey{}}, {PublicKey: noise.PublicKey{}}}
	if _, err := Start(m, q, Options{}); err == nil {
		t.Fatal("started with the same peer twice")
	}
	if _, ok := <-m.Events(); ok {
		// The first event (up) may still be queued; the channel must
		// close after it.
		if _, ok := <-m.Events(); ok {
			t.Fatal("TUN still open after a failed start")
		}
	}
	var _ tun.Device = m
}

// Close ends every goroutine Start began, the follower's included.
func TestStartNetstackClose(t *testing.T) {
	leakcheck.Check(t)
	e, err := StartNetstack(quick(t), netstack.Options{}, Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if e.Net == nil || e.Device.Status().ListenPort == 0 {
		t.Fatalf("no stack or no port: %+v", e.Device.Status())
	}
	e.Close()
	e.Close()
	if err := e.Device.Apply(&device.Config{}); !errors.Is(err, device.ErrClosed) {
		t.Fatalf("Apply after Close: %v", err)
	}
}
