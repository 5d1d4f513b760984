package interop

import (
	"crypto/rand"
	"net/netip"
	"testing"

	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
)

// interopCase is one fips-go <-> wireguard-go setup.
type interopCase struct {
	name string
	// fipsInitiates: only the fips-go side knows the other's endpoint and
	// starts the handshake; otherwise only wireguard-go does.
	fipsInitiates bool
	psk           bool
	inner6        bool  // IPv6 tunnel addresses
	outer6        bool  // UDP between [::1] ports instead of 127.0.0.1
	size          int64 // bytes of each TCP transfer, each way
	concurrent    bool  // both transfers at once instead of one after the other
}

var interopCases = []interopCase{
	{name: "fips-initiates", fipsInitiates: true, size: 64 << 20},
	{name: "wg-initiates", size: 64 << 20},
	{name: "wg-initiates/concurrent", size: 32 << 20, concurrent: true},
	{name: "psk/fips-initiates", fipsInitiates: true, psk: true, size: 16 << 20},
	{name: "psk/wg-initiates", psk: true, size: 16 << 20},
	{name: "ipv6-inner/fips-initiates", fipsInitiates: true, inner6: true, size: 16 << 20},
	{name: "ipv6-inner/wg-initiates", inner6: true, size: 16 << 20},
	{name: "ipv6-outer/wg-initiates", outer6: true, size: 16 << 20},
}

// innerAddrs are the tunnel addresses: fips-go first, wireguard-go second.
func innerAddrs(v6 bool) (netip.Addr, netip.Addr) {
	if v6 {
		return netip.MustParseAddr("fd77::1"), netip.MustParseAddr("fd77::2")
	}
	return netip.MustParseAddr("10.77.0.1"), netip.MustParseAddr("10.77.0.2")
}

func loopback(v6 bool) netip.Addr {
	if v6 {
		return netip.IPv6Loopback()
	}
	return netip.MustParseAddr("127.0.0.1")
}

// newInteropPair starts a fips-go and a wireguard-go node and configures
// each as the other's peer; only the initiator is told the endpoint.
func newInteropPair(t *testing.T, c interopCase, psk noise.PresharedKey) (*fipsNode, *wgNode) {
	t.Helper()
	fa, wa := innerAddrs(c.inner6)
	f := newFipsNode(t, fa, true)
	w := newWGNode(t, wa)
	lo := loopback(c.outer6)
	var toWG, toFips netip.AddrPort
	if c.fipsInitiates {
		toWG = netip.AddrPortFrom(lo, w.listenPort())
	} else {
		toFips = netip.AddrPortFrom(lo, f.listenPort())
	}
	f.addPeer(t, w, toWG, psk)
	w.addPeer(t, f, toFips, psk)
	return f, w
}

// TestInterop joins fips-go and wireguard-go over loopback UDP and checks
// that the handshake completes whichever side starts it (the responder
// learning the initiator's endpoint from it), that ICMP echo works both
// ways, that UDP datagrams up to the MTU and beyond it (IP fragments)
// arrive whole both ways, that TCP streams arrive intact both ways, and
// that fips-go counted the traffic and no drops a clean path never causes.
func TestInterop(t *testing.T) {
	for i, c := range interopCases {
		t.Run(c.name, func(t *testing.T) {
			leakcheck.Check(t)
			var psk noise.PresharedKey
			if c.psk {
				var err error
				if psk, err = noise.GeneratePresharedKey(rand.Reader); err != nil {
					t.Fatal(err)
				}
			}
			f, w := newInteropPair(t, c, psk)
			var initiator, responder node = f, w
			if !c.fipsInitiates {
				initiator, responder = w, f
			}
			// The initiator's ping starts the handshake; until it is done
			// the responder has no endpoint to answer to.
			if err := initiator.ping(responder.addr(), pingAttempts); err != nil {
				t.Fatalf("%s pinging %s: %v", initiator.name(), responder.name(), err)
			}
			checkHandshake(t, c, f, w)
			if err := responder.ping(initiator.addr(), pingAttempts); err != nil {
				t.Fatalf("%s pinging %s: %v", responder.name(), initiator.name(), err)
			}
			for _, size := range datagramSizes(c.inner6) {
				exchangeUDP(t, f, w, size)
				exchangeUDP(t, w, f, size)
			}
			size := scaled(c.size)
			if c.concurrent {
				transferBoth(t, f, w, size, uint64(2*i))
			} else {
				transfer(t, f, w, 5201, size, uint64(2*i))
				transfer(t, w, f, 5202, size, uint64(2*i+1))
			}
			checkCounters(t, f, 2*size)
		})
	}
}

// scaled is size, or a sixteenth of it under the race detector.
func scaled(size int64) int64 {
	if raceEnabled {
		return size / 16
	}
	return size
}

// transferBoth runs a transfer each way at the same time, so data and
// acknowledgements of both streams interleave in both devices.
func transferBoth(t *testing.T, f, w node, size int64, seed uint64) {
	t.Helper()
	errs := make(chan error, 2)
	go func() { errs <- tryTransfer(f, w, 5201, size, seed) }()
	go func() { errs <- tryTransfer(w, f, 5202, size, seed+1) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// checkHandshake asserts the handshake went the way the case set it up:
// the initiator sent the initiation, the responder answered it and learned
// where the initiator is.
func checkHandshake(t *testing.T, c interopCase, f *fipsNode, w *wgNode) {
	t.Helper()
	lo := loopback(c.outer6)
	if c.fipsInitiates {
		if got := f.counter(t, "handshakes_completed"); got == 0 {
			t.Errorf("fips-go initiated, but counted no completed handshake")
		}
		if got, want := w.peerEndpoint(t), netip.AddrPortFrom(lo, f.listenPort()); got != want {
			t.Errorf("wireguard-go learned endpoint %v from the handshake, want %v", got, want)
		}
		return
	}
	if got := f.counter(t, "handshake_responses_sent"); got == 0 {
		t.Errorf("wireguard-go initiated, but fips-go counted no handshake response sent")
	}
	if got := f.counter(t, "handshake_initiations_sent"); got != 0 {
		t.Errorf("fips-go sent %d initiations although it had no endpoint", got)
	}
	if got, want := f.peerEndpoint(t), netip.AddrPortFrom(lo, w.listenPort()); got != want {
		t.Errorf("fips-go learned endpoint %v from the handshake, want %v", got, want)
	}
}

// checkCounters asserts fips-go counted at least the bytes that crossed
// and dropped nothing for reasons a clean loopback path never gives.
func checkCounters(t *testing.T, f *fipsNode, moved int64) {
	t.Helper()
	st := f.dev.Status()
	if p := st.Peers[0]; p.RxBytes < uint64(moved/2) || p.TxBytes < uint64(moved/2) {
		t.Errorf("fips-go peer counters rx %d tx %d bytes, want each >= %d", p.RxBytes, p.TxBytes, moved/2)
	}
	for _, name := range []string{"rx_drop_decrypt_failed", "rx_drop_replayed", "rx_drop_source_not_allowed", "rx_drop_malformed_inner"} {
		if v := f.counter(t, name); v != 0 {
			t.Errorf("fips-go counted %d %s", v, name)
		}
	}
}

// TestInteropPSKMismatch gives the two sides different preshared keys:
// wireguard-go answers fips-go's initiation (the initiation does not
// depend on the PSK), fips-go must reject that response, and no packet may
// cross. The pings are few because they are expected to fail.
func TestInteropPSKMismatch(t *testing.T) {
	leakcheck.Check(t)
	fa, wa := innerAddrs(false)
	f := newFipsNode(t, fa, true)
	w := newWGNode(t, wa)
	var pskF, pskW noise.PresharedKey
	pskF[0], pskW[0] = 1, 2
	f.addPeer(t, w, netip.AddrPortFrom(loopback(false), w.listenPort()), pskF)
	w.addPeer(t, f, netip.AddrPort{}, pskW)
	if err := f.ping(w.addr(), 4); err == nil {
		t.Fatal("a ping crossed a tunnel whose ends hold different preshared keys")
	}
	if got := f.counter(t, "handshake_responses_received"); got == 0 {
		t.Fatal("fips-go received no handshake response; the test did not exercise the PSK")
	}
	if got := f.counter(t, "rx_drop_handshake_rejected"); got == 0 {
		t.Error("fips-go did not count the response it had to reject")
	}
	if got := f.counter(t, "handshakes_completed"); got != 0 {
		t.Errorf("fips-go completed %d handshakes with a mismatched PSK", got)
	}
	if st := f.dev.Status(); !st.Peers[0].LastHandshake.IsZero() {
		t.Errorf("fips-go reports a last handshake at %v", st.Peers[0].LastHandshake)
	}
}
