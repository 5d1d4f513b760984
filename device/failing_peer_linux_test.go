package device

import (
	"crypto/rand"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/device/timers"
	"github.com/fips-go/fips-go/tun/memtun"
)

// openFDs counts this process's open file descriptors.
func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// A peer whose handshakes keep failing (its endpoint answers every
// initiation with a forged response) costs a bounded set of goroutines and
// sockets however many attempts fail: hundreds of initiations with a
// 20 ms Rekey-Timeout, traffic waiting all along, and the goroutine and
// descriptor counts at the end are those after the first attempts. Other
// implementations shipped a regression where each failed attempt left a
// socket or a goroutine behind.
func TestFailingPeerAccumulatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 3 seconds")
	}
	lo := netip.MustParseAddr("127.0.0.1")
	// The "peer": answers each datagram with a response-sized message of
	// random bytes, which fails its MAC or names no handshake.
	pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			_, from, err := pc.ReadFromUDP(buf)
			if err != nil {
				return
			}
			resp := make([]byte, noise.ResponseSize)
			rand.Read(resp)
			resp[0], resp[1], resp[2], resp[3] = byte(noise.TypeResponse), 0, 0, 0
			pc.WriteToUDP(resp, from)
		}
	}()
	td := memtun.New("fail", 1420, 4096)
	a := newNode(t, td, conn.NewDefault(conn.Options{}), addrA, lo, Options{
		Timers: timers.Params{RekeyTimeout: 20 * time.Millisecond, RekeyAttemptTime: 400 * time.Millisecond},
	})
	ep := pc.LocalAddr().(*net.UDPAddr).AddrPort()
	priv, err := noise.GeneratePrivateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.dev.Apply(&Config{Peers: []PeerConfig{{
		PublicKey:  priv.PublicKey(),
		Endpoint:   &ep,
		AllowedIPs: []AllowedIPChange{{Prefix: netip.PrefixFrom(addrB, 32)}},
	}}}); err != nil {
		t.Fatal(err)
	}
	push := func(d time.Duration) {
		end := time.Now().Add(d)
		for i := uint32(0); time.Now().Before(end); i++ {
			td.Inject(udpPacket(addrA, addrB, i, 200))
			time.Sleep(5 * time.Millisecond)
		}
	}
	push(500 * time.Millisecond) // the first attempts, and whatever they set up
	g0, f0 := runtime.NumGoroutine(), openFDs(t)
	sent0 := counter(a.dev.Status(), "handshake_initiations_sent")
	push(2500 * time.Millisecond)
	st := a.dev.Status()
	sent := counter(st, "handshake_initiations_sent") - sent0
	g1, f1 := runtime.NumGoroutine(), openFDs(t)
	t.Logf("%d more initiations failed; goroutines %d -> %d, descriptors %d -> %d, responses dropped: bad MAC %d, unknown index %d",
		sent, g0, g1, f0, f1, counter(st, "rx_drop_handshake_bad_mac"), counter(st, "rx_drop_unknown_index"))
	if sent < 20 {
		t.Fatalf("only %d initiations in 2.5 s with a 20 ms Rekey-Timeout; the test did not exercise retries", sent)
	}
	if counter(st, "handshakes_completed") != 0 {
		t.Fatal("a forged response completed a handshake")
	}
	// Slack for the runtime's own goroutines and a socket being replaced.
	if g1 > g0+2 {
		t.Fatalf("goroutines grew from %d to %d over %d failed attempts", g0, g1, sent)
	}
	if f1 > f0+2 {
		t.Fatalf("descriptors grew from %d to %d over %d failed attempts", f0, f1, sent)
	}
}
