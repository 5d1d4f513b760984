package interop

import (
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
)

// simultaneousAttempts covers wireguard-go's 15 s recovery (KeepaliveTimeout
// + RekeyTimeout) with room to spare; see TestInteropSimultaneousInitiation.
const simultaneousAttempts = 44

// eventually polls cond every 50 ms until it holds or limit passes; it is
// for waiting on events that come by themselves (timers), not a speed test.
func eventually(limit time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(limit); ; {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestInteropPersistentKeepalive turns on a 1 s persistent keepalive on
// both sides of an idle tunnel: each must receive the other's keepalives
// (empty transport messages) as authenticated traffic, without counting
// them as drops.
func TestInteropPersistentKeepalive(t *testing.T) {
	leakcheck.Check(t)
	f, w := newInteropPair(t, interopCase{fipsInitiates: true}, noise.PresharedKey{})
	if err := f.ping(w.addr(), pingAttempts); err != nil {
		t.Fatal(err)
	}
	one := uint16(1)
	pub := w.publicKey()
	if err := f.dev.Apply(&device.Config{Peers: []device.PeerConfig{{PublicKey: pub, UpdateOnly: true, PersistentKeepalive: &one}}}); err != nil {
		t.Fatal(err)
	}
	fpub := f.publicKey()
	if err := w.dev.IpcSet("public_key=" + fpub.Hex() + "\nupdate_only=true\npersistent_keepalive_interval=1\n"); err != nil {
		t.Fatal(err)
	}
	wgRx := func() uint64 {
		v, _ := strconv.ParseUint(w.get(t, "rx_bytes"), 10, 64)
		return v
	}
	fRx0, wRx0 := f.dev.Status().Peers[0].RxBytes, wgRx()
	sent0 := f.counter(t, "keepalives_sent")
	// Three intervals: at least two keepalives each way.
	if !eventually(10*time.Second, func() bool { return f.counter(t, "keepalives_sent") >= sent0+2 && wgRx() > wRx0 }) {
		t.Errorf("fips-go sent %d keepalives, wireguard-go rx_bytes %d -> %d", f.counter(t, "keepalives_sent")-sent0, wRx0, wgRx())
	}
	if !eventually(10*time.Second, func() bool { return f.dev.Status().Peers[0].RxBytes > fRx0 }) {
		t.Errorf("fips-go received nothing from wireguard-go's persistent keepalive")
	}
	for _, name := range []string{"rx_drop_malformed_inner", "rx_drop_decrypt_failed", "rx_drop_replayed"} {
		if v := f.counter(t, name); v != 0 {
			t.Errorf("fips-go counted %d %s", v, name)
		}
	}
}

// TestInteropSimultaneousInitiation gives both sides each other's endpoint
// and lets both start a handshake at the same moment: whichever sessions
// win, pings and a transfer must then work both ways.
//
// The pings get simultaneousAttempts, more than wireguard-go needs to
// recover from a race of its own that this test hits in about 1% of runs:
// wireguard-go handles handshake messages on several goroutines, and when
// it consumes our response to its initiation while another goroutine
// answers our initiation, ConsumeMessageResponse's state check (under
// RLock) and its update (under Lock) straddle CreateMessageResponse and
// BeginSymmetricSession. Its initiator keypair is then installed with
// local index 0, not in its index table: it sends on it, we confirm and
// answer on it (to the index its initiation named, as the protocol says),
// and it drops every answer as unknown until its 15 s "stopped hearing
// back" timer starts a new handshake. fips-go is correct throughout (its
// counters show one response to an index it had replaced, as the kernel's
// would).
func TestInteropSimultaneousInitiation(t *testing.T) {
	leakcheck.Check(t)
	fa, wa := innerAddrs(false)
	f := newFipsNode(t, fa, true)
	w := newWGNode(t, wa)
	lo := loopback(false)
	f.addPeer(t, w, netip.AddrPortFrom(lo, w.listenPort()), noise.PresharedKey{})
	w.addPeer(t, f, netip.AddrPortFrom(lo, f.listenPort()), noise.PresharedKey{})
	errs := make(chan error, 2)
	go func() { errs <- f.ping(w.addr(), simultaneousAttempts) }()
	go func() { errs <- w.ping(f.addr(), simultaneousAttempts) }()
	for range 2 {
		if err := <-errs; err != nil {
			dumpState(t, f, w)
			t.Fatal(err)
		}
	}
	transferBoth(t, f, w, scaled(8<<20), 99)
}

// dumpState logs both devices' view of the tunnel, for diagnosing a failure.
func dumpState(t testing.TB, f *fipsNode, w *wgNode) {
	t.Helper()
	st := f.dev.Status()
	for _, p := range st.Peers {
		t.Logf("fips-go peer: endpoint %v, last handshake %v, rx %d, tx %d", p.Endpoint, p.LastHandshake, p.RxBytes, p.TxBytes)
	}
	for _, c := range st.Counters {
		if c.Value != 0 {
			t.Logf("fips-go %s = %d", c.Name, c.Value)
		}
	}
	s, err := w.dev.IpcGet()
	t.Logf("wireguard-go: %v\n%s", err, s)
}
