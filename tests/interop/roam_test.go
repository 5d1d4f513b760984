package interop

import (
	"net/netip"
	"strconv"
	"testing"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
)

// TestInteropRoaming moves each side to a new UDP port after the
// handshake: the other side must follow it to the source of the
// authenticated packets it receives (WireGuard's roaming), with no
// reconfiguration.
func TestInteropRoaming(t *testing.T) {
	leakcheck.Check(t)
	c := interopCase{name: "roaming"}
	f, w := newInteropPair(t, c, noise.PresharedKey{})
	if err := w.ping(f.addr(), pingAttempts); err != nil {
		t.Fatalf("wireguard-go pinging fips-go: %v", err)
	}
	lo := loopback(false)

	// wireguard-go rebinds to a port of the kernel's choosing.
	old := w.listenPort()
	if err := w.dev.IpcSet("listen_port=0\n"); err != nil {
		t.Fatal(err)
	}
	p, err := strconv.ParseUint(w.get(t, "listen_port"), 10, 16)
	if err != nil || p == 0 || uint16(p) == old {
		t.Fatalf("wireguard-go did not move off port %d: %v, %v", old, p, err)
	}
	w.port = uint16(p)
	if err := w.ping(f.addr(), pingAttempts); err != nil {
		t.Fatalf("after wireguard-go moved to port %d: %v", w.port, err)
	}
	if got, want := f.peerEndpoint(t), netip.AddrPortFrom(lo, w.port); got != want {
		t.Errorf("fips-go holds endpoint %v after wireguard-go moved, want %v", got, want)
	}

	// Now fips-go moves.
	old = f.listenPort()
	zero := uint16(0)
	if err := f.dev.Apply(&device.Config{ListenPort: &zero}); err != nil {
		t.Fatal(err)
	}
	f.port = f.dev.Status().ListenPort
	if f.port == 0 || f.port == old {
		t.Fatalf("fips-go did not move off port %d: now %d", old, f.port)
	}
	if err := f.ping(w.addr(), pingAttempts); err != nil {
		t.Fatalf("after fips-go moved to port %d: %v", f.port, err)
	}
	if got, want := w.peerEndpoint(t), netip.AddrPortFrom(lo, f.port); got != want {
		t.Errorf("wireguard-go holds endpoint %v after fips-go moved, want %v", got, want)
	}
	transfer(t, f, w, 5201, scaled(4<<20), 77)
	transfer(t, w, f, 5202, scaled(4<<20), 78)
}
