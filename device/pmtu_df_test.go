package device

import (
	"context"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fips-go/fips-go/device/internal/pmtu"
	"github.com/fips-go/fips-go/internal/packet"
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
				t.Fatalf("segment %d lost twice: the resend must pass fragmented", seq)
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
// say so, nothing is lost and the path MTU stays unknown (the tunnel's
// fits); the path is then left alone for dfRecheck, and sampled again
// after it, so that a path that narrows later is found.
func TestPMTUDFSamplesFit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := probePairOpts(t, 1500, false)
		exchange(t, a, b, 0)
		if lost := innerSender(t, a, b, 3*time.Second); lost != 0 {
			t.Fatalf("%d segments lost on a path that carries them", lost)
		}
		first := counter(a.dev.Status(), "tx_pmtu_df_samples")
		if first < pmtu.SamplePasses || first > pmtu.SamplePasses+4 {
			t.Fatalf("%d samples in 3 s, want %d and a few while the verdict waits", first, pmtu.SamplePasses)
		}
		if ps := peerStats(t, a); ps.PathMTU != 0 {
			t.Fatalf("path MTU %d (%s), want unknown", ps.PathMTU, ps.PathMTUSource)
		}
		innerSender(t, a, b, 2*time.Second)
		if c := counter(a.dev.Status(), "tx_pmtu_df_samples"); c != first {
			t.Fatalf("%d samples within dfRecheck, want %d", c, first)
		}
		innerSender(t, a, b, dfRecheck)
		if c := counter(a.dev.Status(), "tx_pmtu_df_samples"); c <= first {
			t.Fatal("not sampled again after dfRecheck")
		}
	})
}
