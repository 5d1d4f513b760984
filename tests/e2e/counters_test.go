package e2e

import (
	"encoding/json"
	"testing"
	"time"
)

// linkStats are one interface's counters from `ip -s -j link show`.
type linkStats struct {
	RxBytes, RxPackets, RxDropped uint64
	TxBytes, TxPackets, TxDropped uint64
}

func (ns *netns) linkStats(dev string) linkStats {
	ns.T.Helper()
	var out []struct {
		Stats64 struct {
			Rx struct{ Bytes, Packets, Dropped uint64 } `json:"rx"`
			Tx struct{ Bytes, Packets, Dropped uint64 } `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal([]byte(ns.Run("ip", "-s", "-j", "link", "show", "dev", dev)), &out); err != nil || len(out) != 1 {
		ns.T.Fatalf("ip -s -j link show %s: %v", dev, err)
	}
	s := out[0].Stats64
	return linkStats{s.Rx.Bytes, s.Rx.Packets, s.Rx.Dropped, s.Tx.Bytes, s.Tx.Packets, s.Tx.Dropped}
}

func (s linkStats) sub(o linkStats) linkStats {
	return linkStats{s.RxBytes - o.RxBytes, s.RxPackets - o.RxPackets, s.RxDropped - o.RxDropped,
		s.TxBytes - o.TxBytes, s.TxPackets - o.TxPackets, s.TxDropped - o.TxDropped}
}

// wgLen is the size of the transport datagram (UDP payload) carrying an
// inner packet of n bytes: 16 bytes of header, the packet padded to a
// multiple of 16 but not past the MTU, and a 16-byte tag.
func wgLen(n, mtu int) uint64 {
	p := (n + 15) &^ 15
	if p > mtu {
		p = max(n, mtu)
	}
	return uint64(16 + p + 16)
}

// snapshot is every counter of one side that the test compares.
type snapshot struct {
	tun    linkStats
	veth   linkStats
	rx, tx uint64 // wg show dump, for the peer
	ctr    map[string]uint64
}

func snap(n, peer *node, vethDev string) snapshot {
	pd := n.peer(peer)
	return snapshot{tun: n.ns.linkStats(n.iface), veth: n.ns.linkStats(vethDev), rx: pd.rx, tx: pd.tx, ctr: n.counters()}
}

// TestCounters: the TUN's interface counters and wg show's transfer bytes
// agree with the traffic the test sent. Pings of three sizes (84, 1029 and
// 1420 bytes, the last hitting the MTU so its padding is clipped) must move
// each TUN's packet and byte counters by exactly the packets sent, and each
// peer's wg tx/rx by exactly the transport datagram sizes (header + padded
// packet + tag, plus 32 bytes per keepalive fips-go counted). Then a 16 MiB
// TCP stream, sent with GSO off so the veth counts one packet per datagram:
// the sender's wg tx bytes equal its veth's tx bytes less 42 bytes of
// Ethernet+IPv4+UDP header per packet (to within stray ARP/ND noise), the
// receiver's wg rx equals the sender's tx, and the bytes lie within the
// bounds the payload implies.
func TestCounters(t *testing.T) {
	requireRoot(t)
	p := newPair(t, pairOpts{implA: impl{name: "fips-go(no GSO)", bin: binPath(t, binFipsGo),
		env: []string{"FIPS_GO_DISABLE_GSO=1"}}, noV6Overlay: true})
	p.a.ns.waitPing(p.b.tun4, 20*time.Second)
	time.Sleep(500 * time.Millisecond) // let the handshake's keepalive pass

	t.Run("pings", func(t *testing.T) {
		a0, b0 := snap(p.a, p.b, p.link.ifA), snap(p.b, p.a, p.link.ifB)
		const n = 40
		var pkts, inner, wire uint64
		for _, size := range []int{56, 1001, 1392} {
			r := p.a.ns.ping(p.b.tun4, n, size, true, "-i", "0.01")
			if r.received != n {
				t.Fatalf("ping -s %d: %d of %d replies\n%s", size, r.received, n, r.out)
			}
			pkts += n
			inner += n * uint64(size+28)
			wire += n * wgLen(size+28, 1420)
		}
		a1, b1 := snap(p.a, p.b, p.link.ifA), snap(p.b, p.a, p.link.ifB)
		da, db := a1.tun.sub(a0.tun), b1.tun.sub(b0.tun)
		want := linkStats{RxBytes: inner, RxPackets: pkts, TxBytes: inner, TxPackets: pkts}
		if da != want || db != want {
			t.Errorf("TUN counters moved by A %+v, B %+v; want %+v on both", da, db, want)
		}
		kaA := 32 * (a1.ctr["keepalives_sent"] - a0.ctr["keepalives_sent"])
		kaB := 32 * (b1.ctr["keepalives_sent"] - b0.ctr["keepalives_sent"])
		checkEq(t, "A wg tx", a1.tx-a0.tx, wire+kaA)
		checkEq(t, "B wg rx", b1.rx-b0.rx, wire+kaA)
		checkEq(t, "B wg tx", b1.tx-b0.tx, wire+kaB)
		checkEq(t, "A wg rx", a1.rx-a0.rx, wire+kaB)
		for _, k := range []string{"handshake_initiations_sent", "handshake_initiations_received"} {
			if a1.ctr[k] != a0.ctr[k] || b1.ctr[k] != b0.ctr[k] {
				t.Errorf("a handshake happened during the measurement (%s); byte counts may include it", k)
			}
		}
	})

	t.Run("tcp", func(t *testing.T) {
		a0, b0 := snap(p.a, p.b, p.link.ifA), snap(p.b, p.a, p.link.ifB)
		const payload = 16 << 20
		tcpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5001), helperSpec{Bytes: payload, Seed: 9})
		time.Sleep(300 * time.Millisecond) // the last ACKs
		a1, b1 := snap(p.a, p.b, p.link.ifA), snap(p.b, p.a, p.link.ifB)
		tx, rx := a1.tx-a0.tx, b1.rx-b0.rx
		veth := a1.veth.sub(a0.veth)
		t.Logf("A: wg tx %d, veth tx %d bytes in %d packets; B: wg rx %d, TUN rx %d bytes",
			tx, veth.TxBytes, veth.TxPackets, rx, b1.tun.RxBytes-b0.tun.RxBytes)
		if rx != tx {
			t.Errorf("B received %d wg bytes from A, A sent %d", rx, tx)
		}
		onWire := int64(veth.TxBytes) - 42*int64(veth.TxPackets)
		if d := onWire - int64(tx); d < -2048 || d > 2048 {
			t.Errorf("A's veth carried %d bytes of UDP payload, wg says A sent %d (difference %d)", onWire, tx, d)
		}
		// Each datagram holds at most MTU-40 = 1380 bytes of TCP payload,
		// behind 40 bytes of IPv4+TCP header and 32 of WireGuard overhead.
		segs := uint64((payload + 1379) / 1380)
		if min := uint64(payload) + 72*segs; tx < min {
			t.Errorf("A's wg tx grew by %d bytes, less than the %d that %d payload bytes need", tx, min, payload)
		}
		tunRx := b1.tun.RxBytes - b0.tun.RxBytes
		if tunRx < payload || tunRx > rx {
			t.Errorf("B's TUN rx grew by %d bytes; want between the payload %d and the wg bytes received %d", tunRx, payload, rx)
		}
	})
}

func checkEq(t *testing.T, what string, got, want uint64) {
	t.Helper()
	if got != want {
		t.Errorf("%s grew by %d bytes, want %d", what, got, want)
	}
}

// TestHandshakeBytesCounted: wg show's transfer counters include the
// handshake messages, as wireguard-go and the kernel count them (an
// initiation is 148 bytes, a response 92). On a fresh pair, one ping from A
// must leave A with tx = 148 + 128 and rx = 92 + 128 (the ping and its reply
// are 84-byte packets, 128-byte datagrams), and B with the mirror image,
// plus 32 bytes per keepalive either side sent. Run against wireguard-go as
// the reference and against fips-go.
func TestHandshakeBytesCounted(t *testing.T) {
	requireRoot(t)
	for _, mk := range []func(testing.TB) impl{wireguardGo, fipsGo} {
		im := mk(t)
		t.Run(im.name, func(t *testing.T) {
			p := newPair(t, pairOpts{implA: im, implB: im, noV6Overlay: true})
			if r := p.a.ns.ping(p.b.tun4, 1, 56, false, "-W", "5"); r.received != 1 {
				t.Fatalf("first ping got no reply\n%s", r.out)
			}
			time.Sleep(500 * time.Millisecond)
			a, b := p.a.peer(p.b), p.b.peer(p.a)
			t.Logf("%s: A tx %d rx %d, B tx %d rx %d", im.name, a.tx, a.rx, b.tx, b.rx)
			const initiation, response, ping = 148, 92, 128
			// Anything beyond the handshake message and the ping must be
			// whole keepalives, and what one side sent the other received.
			extraA, extraB := int64(a.tx)-initiation-ping, int64(b.tx)-response-ping
			if extraA < 0 || extraA%32 != 0 || b.rx != a.tx {
				t.Errorf("%s: A sent %d, B received %d; want %d (initiation + ping) plus 32 per keepalive",
					im.name, a.tx, b.rx, initiation+ping)
			}
			if extraB < 0 || extraB%32 != 0 || a.rx != b.tx {
				t.Errorf("%s: B sent %d, A received %d; want %d (response + reply) plus 32 per keepalive",
					im.name, b.tx, a.rx, response+ping)
			}
		})
	}
}
