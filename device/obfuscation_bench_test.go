package device

import (
	"net/netip"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn"
)

// BenchmarkPipelineObfuscated is BenchmarkPipeline (real loopback UDP, GSO
// and GRO) plain, with AmneziaWG 1.0's parameters and with 2.0's transport
// padding and type ranges, side by side.
func BenchmarkPipelineObfuscated(b *testing.B) {
	awg2 := awgSample
	awg2.S3, awg2.S4 = 21, 13
	awg2.H1, awg2.H1Max = 100000, 199999
	awg2.H2, awg2.H2Max = 200000, 299999
	awg2.H3, awg2.H3Max = 300000, 399999
	awg2.H4, awg2.H4Max = 400000, 4000000000
	for _, c := range []struct {
		name string
		o    *Obfuscation
	}{{"plain", nil}, {"awg1.0", &awgSample}, {"awg2.0", &awg2}} {
		b.Run(c.name, func(b *testing.B) { benchPipeline(b, c.o) })
	}
}

func benchPipeline(b *testing.B, o *Obfuscation) {
	lo := netip.MustParseAddr("127.0.0.1")
	ta := newFeedTUN(udpPacket(addrA, addrB, 1, 1392))
	tb := newFeedTUN(udpPacket(addrB, addrA, 1, 1392))
	x := newNode(b, ta, conn.NewDefault(conn.Options{}), addrA, lo, Options{})
	y := newNode(b, tb, conn.NewDefault(conn.Options{}), addrB, lo, Options{})
	if o != nil {
		for _, n := range []*node{x, y} {
			if err := n.dev.Apply(&Config{Obfuscation: o}); err != nil {
				b.Fatal(err)
			}
		}
	}
	link(b, x, y)
	ta.feed <- 1
	for tb.written.Load() == 0 {
		<-tb.wrote
	}
	const batch = 64
	b.SetBytes(batch * 1420)
	b.ReportAllocs()
	b.ResetTimer()
	want := tb.written.Load()
	lost := uint64(0)
	// A datagram lost on loopback never arrives: after a second without
	// progress, stop waiting for it.
	wait := func(ahead uint64) {
		for tb.written.Load()+ahead < want {
			select {
			case <-tb.wrote:
			case <-time.After(time.Second):
				lost += want - ahead - tb.written.Load()
				want = tb.written.Load() + ahead
			}
		}
	}
	for range b.N {
		want += batch
		ta.feed <- batch
		wait(batch * 8)
	}
	wait(0)
	if lost > 0 {
		b.Logf("%d packets lost", lost)
	}
}
