package e2e

import (
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
		udpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5002), 20000, 1200, 12_500_000, 0.9)
		logUDPDrops(t, p.a, p.b)
	})
	t.Run("udp-v6", func(t *testing.T) {
		udpTransfer(t, p.b.ns, p.a.ns, svc(p.a.tun6, 5003), 10000, 1200, 12_500_000, 0.9)
		logUDPDrops(t, p.b, p.a)
	})
	t.Run("iperf3", func(t *testing.T) {
		logIperf(t, "fips-go<->fips-go MTU 1420", p.a.ns, p.b.ns, p.b.tun4, 5)
	})
}

// TestUDPUnderLoad: a UDP stream paced at up to 150 Mbit/s (the pacer
// reaches about 130 on this machine), well within what the tunnel carries
// over a veth, must arrive at least 90% complete and intact,
// first with wireguard-go on both ends (the reference, which blocks the
// TUN reader when its per-peer queue of 1024 batches is full) and then with
// fips-go, whose per-peer queue must not drop packets (tx_drop_queue_full,
// rx_drop_queue_full) at this rate.
func TestUDPUnderLoad(t *testing.T) {
	requireRoot(t)
	for _, mk := range []func(testing.TB) impl{wireguardGo, fipsGo} {
		im := mk(t)
		t.Run(im.name, func(t *testing.T) {
			p := newPair(t, pairOpts{implA: im, implB: im})
			p.a.ns.waitPing(p.b.tun4, 20*time.Second)
			udpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5002), 30000, 1200, 18_750_000, 0.9)
			logUDPDrops(t, p.a, p.b)
			if im.name != "fips-go" {
				return
			}
			a, b := p.a.counters(), p.b.counters()
			if a["tx_drop_queue_full"] != 0 || b["rx_drop_queue_full"] != 0 {
				t.Errorf("fips-go dropped packets from full per-peer queues: sender tx_drop_queue_full=%d, receiver rx_drop_queue_full=%d",
					a["tx_drop_queue_full"], b["rx_drop_queue_full"])
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
