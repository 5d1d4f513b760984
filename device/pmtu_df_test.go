package device

import (
	"context"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device/internal/pmtu"
	"github.com/fips-go/fips-go/internal/packet"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
	"github.com/fips-go/fips-go/tun/memtun"
)

// innerSender plays an inner TCP sender at a toward b over a path that
// fragments a's ordinary datagrams (they arrive) and drops those sent
// with DF above its size (probeLab's probeSend, which DF samples use):
// every 50 ms a full-size segment, and one that did not reach b sent
// again, as a fast retransmit repairs a loss. A packet each way every
// half second keeps the peer heard from. It stops after dur or once a's
// path MTU for b is known, and reports the segments lost.
func innerSender(t *testing.T, a, b *node, dur time.Duration) (lost int) {
	t.Helper()
	seq := uint32(1)
	arrived := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := b.tun.(*memtun.Device).Next(ctx)
		return err == nil
	}
	inject := func(pkt []byte) {
		if err := a.tun.(*memtun.Device).Inject(pkt); err != nil {
			t.Fatal(err)
		}
	}
	for i, end := 0, time.Now().Add(dur); time.Now().Before(end); i++ {
		if i%10 == 0 {
			exchange(t, a, b, uint32(i))
		}
		if peerStats(t, a).PathMTU != 0 {
			return lost
		}
		seg, err := packet.TCP(packet.TCPSegment{Src: netip.AddrPortFrom(addrA, 40000), Dst: netip.AddrPortFrom(addrB, 5201),
			Seq: seq, Flags: packet.TCPAck, Window: 1000, Payload: make([]byte, 1380)})
		if err != nil {
			t.Fatal(err)
		}
		inject(seg)
		if !arrived() {
			lost++
			inject(seg)
			if !arrived() {
				// Only the resend that shows the black hole is kept
				// back: it is answered at once.
				if peerStats(t, a).PathMTU == 0 {
					t.Fatalf("segment %d lost twice: the resend must pass fragmented", seq)
				}
				in, err := packet.Parse(next(t, a.tun, time.Second))
				if err != nil || in.Proto != packet.ProtoICMPv4 || in.ICMPType != 3 || in.ICMPCode != 4 {
					t.Fatalf("got %+v (%v), want fragmentation-needed for the resend", in, err)
				}
				return lost
			}
		}
		seq += 1380
		time.Sleep(50 * time.Millisecond)
	}
	return lost
}

// TestPMTUDFSamplesBlackHole: toward a peer that answers no probes, over an
// IPv4 path that fragments a's datagrams and drops those with DF above
// 1300 bytes without a word (ICMP filtered), a's DF samples are lost and
// the inner TCP resends them: after three, the path MTU is the 1280-byte
// floor and the inner stack is told. Only the samples were lost. Before
// the samples, nothing ever told: every datagram went fragmented.
func TestPMTUDFSamplesBlackHole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := probePairOpts(t, 1300, false)
		exchange(t, a, b, 0)
		lost := innerSender(t, a, b, 10*time.Second)
		ps := peerStats(t, a)
		if ps.PathMTU != 1280 || ps.PathMTUSource != "tcp" {
			t.Fatalf("path MTU %d (%s), want the 1280 floor", ps.PathMTU, ps.PathMTUSource)
		}
		st := a.dev.Status()
		samples := counter(st, "tx_pmtu_df_samples")
		if lost != 3 || samples != 3 || counter(st, "tx_pmtu_tcp_black_holes") != 1 {
			t.Fatalf("%d segments lost, %d samples, %d black holes: want 3, 3, 1", lost, samples, counter(st, "tx_pmtu_tcp_black_holes"))
		}
		// Known, the path is sampled no more.
		time.Sleep(5 * time.Second)
		exchange(t, a, b, 1000)
		if c := counter(a.dev.Status(), "tx_pmtu_df_samples"); c != samples {
			t.Fatalf("%d samples after the verdict, want %d", c, samples)
		}
	})
}

// TestPMTUDFSamplesFit: where DF datagrams of full size pass, the samples
// cost nothing: no segment is lost, the path MTU stays unknown (the
// tunnel's fits), and at most one datagram in SampleEvery goes with DF.
func TestPMTUDFSamplesFit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := probePairOpts(t, 1500, false)
		exchange(t, a, b, 0)
		start := time.Now()
		if lost := innerSender(t, a, b, 10*time.Second); lost != 0 {
			t.Fatalf("%d segments lost on a path that carries them", lost)
		}
		if ps := peerStats(t, a); ps.PathMTU != 0 {
			t.Fatalf("path MTU %d (%s), want unknown", ps.PathMTU, ps.PathMTUSource)
		}
		n := counter(a.dev.Status(), "tx_pmtu_df_samples")
		if most := uint64(time.Since(start)/pmtu.SampleEvery) + 1; n < 10 || n > most {
			t.Fatalf("%d samples in %v, want 10 to %d", n, time.Since(start), most)
		}
	})
}

// TestPMTUSamplesIPv6Shrink: over IPv6, whose routers never fragment, a
// path that narrows mid-transfer is a black hole for every full-size
// datagram, and the inner TCP, stalled, resends its first lost segment at
// its timeouts, 200 ms doubling. With a stock peer, no ICMP and a busy
// peer (the TCP watch is off above 1 MiB/s), the samples, taken from what
// is sent, see the resends: the floor is set, and the resend that shows
// it is answered with fragmentation-needed at once: the fourth resend,
// the third sample lost, not the inner TCP's next timeout.
func TestPMTUSamplesIPv6Shrink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		leakcheck.Check(t)
		netw := membind.NewNetwork(membind.NetOptions{})
		hostA, hostB := netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
		nb := &narrowBind{Bind: netw.NewBind(hostA)}
		nb.carries.Store(1500)
		a := newNode(t, memtun.New("a", 1420, 4096), nb, addrA, hostA, Options{Logf: t.Logf})
		b := newNode(t, memtun.New("b", 1420, 4096), netw.NewBind(hostB), addrB, hostB, Options{Logf: t.Logf})
		link(t, a, b)
		exchange(t, a, b, 0)
		// A busy transfer: 2 MiB a second of full-size segments.
		seq := uint32(1)
		bulk := func(d time.Duration, arrive bool) {
			for end := time.Now().Add(d); time.Now().Before(end); {
				for range 15 {
					if err := a.tun.(*memtun.Device).Inject(seqSegment(t, seq)); err != nil {
						t.Fatal(err)
					}
					seq += 1380
					if arrive {
						next(t, b.tun, time.Second)
					}
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		bulk(3*time.Second, true)
		nb.carries.Store(1300)
		bulk(100*time.Millisecond, false) // lost from here on
		stuck := seqSegment(t, seq-1380)
		resends := 0
		for gap := 200 * time.Millisecond; ; gap *= 2 {
			time.Sleep(gap)
			if err := a.tun.(*memtun.Device).Inject(stuck); err != nil {
				t.Fatal(err)
			}
			resends++
			synctest.Wait()
			if peerStats(t, a).PathMTU != 0 {
				break
			}
			if resends == 8 {
				t.Fatal("no black hole found in 8 resends")
			}
		}
		in, err := packet.Parse(next(t, a.tun, time.Second))
		if err != nil || in.Proto != packet.ProtoICMPv4 || in.ICMPType != 3 || in.ICMPCode != 4 {
			t.Fatalf("got %+v (%v), want fragmentation-needed for the resend", in, err)
		}
		if resends > 4 {
			t.Fatalf("found at resend %d, want by the fourth", resends)
		}
		if ps := peerStats(t, a); ps.PathMTU != 1280 || ps.PathMTUSource != "tcp" {
			t.Fatalf("path MTU %d (%s), want the 1280 floor", ps.PathMTU, ps.PathMTUSource)
		}
	})
}

func seqSegment(t *testing.T, seq uint32) []byte {
	t.Helper()
	seg, err := packet.TCP(packet.TCPSegment{Src: netip.AddrPortFrom(addrA, 40000), Dst: netip.AddrPortFrom(addrB, 5201),
		Seq: seq, Flags: packet.TCPAck, Window: 1000, Payload: make([]byte, 1380)})
	if err != nil {
		t.Fatal(err)
	}
	return seg
}
