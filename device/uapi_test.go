package device_test

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net/netip"
	"runtime"
	"testing"

	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/testkit/ipctest"
	"github.com/fips-go/fips-go/ipc"
	"github.com/fips-go/fips-go/tun/memtun"
)

func newDevice(tb testing.TB) *device.Device {
	tb.Helper()
	netw := membind.NewNetwork(membind.NetOptions{})
	d, err := device.New(memtun.New("u", 1420, 16), netw.NewBind(netip.MustParseAddr("192.0.2.1")), device.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}

// Every malformed or invalid UAPI request is refused with a negative errno
// and leaves the real device's configuration byte for byte as it was.
func TestBadRequestsLeaveDeviceUnchanged(t *testing.T) {
	ipctest.RunBadRequests(t, newDevice(t))
	t.Run("device", func(t *testing.T) {
		ipctest.RunRequests(t, newDevice(t), ipctest.DeviceBadRequests, ipctest.SeedObfuscation)
	})
}

// setRequest is a set=1 body configuring n peers with two allowed IPs each.
func setRequest(tb testing.TB, n int) []byte {
	var b bytes.Buffer
	priv, _ := noise.GeneratePrivateKey(rand.Reader)
	fmt.Fprintf(&b, "private_key=%s\nlisten_port=0\nreplace_peers=true\n", priv.Hex())
	for i := range n {
		k, err := noise.GeneratePrivateKey(rand.Reader)
		if err != nil {
			tb.Fatal(err)
		}
		pub := k.PublicKey()
		fmt.Fprintf(&b, "public_key=%s\nendpoint=198.51.100.%d:%d\nallowed_ip=10.%d.%d.0/24\nallowed_ip=fd00:%x::/64\n",
			pub.Hex(), i%250+1, 1024+i%60000, i>>8&255, i&255, i)
	}
	b.WriteString("\n")
	return b.Bytes()
}

// BenchmarkApply10kPeers is one set request of 10,000 peers with 2 allowed
// IPs each, parsed and applied to a real device (target: under 2 s).
func BenchmarkApply10kPeers(b *testing.B) {
	req := setRequest(b, 10000)
	d := newDevice(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(req)))
	for b.Loop() {
		cfg, err := ipc.ParseSet(bytes.NewReader(req), len(req)+1)
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Apply(cfg); err != nil {
			b.Fatal(err)
		}
	}
	if n := len(d.Status().Peers); n != 10000 {
		b.Fatalf("%d peers configured, want 10000", n)
	}
}

// BenchmarkGet10kPeers is get=1 of that configuration (target: under 1 s).
func BenchmarkGet10kPeers(b *testing.B) {
	req := setRequest(b, 10000)
	d := newDevice(b)
	cfg, err := ipc.ParseSet(bytes.NewReader(req), len(req)+1)
	if err != nil {
		b.Fatal(err)
	}
	if err := d.Apply(cfg); err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		out.Reset()
		if err := ipc.WriteGet(&out, d.Status()); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(out.Len()))
}

// Idle peers cost no goroutines of their own.
func TestIdlePeersCostNoGoroutines(t *testing.T) {
	d := newDevice(t)
	before := runtime.NumGoroutine()
	req := setRequest(t, 2000)
	cfg, err := ipc.ParseSet(bytes.NewReader(req), len(req)+1)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	if after := runtime.NumGoroutine(); after > before+2 {
		t.Fatalf("2000 idle peers added %d goroutines", after-before)
	}
}
