package netstack

import (
	"context"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	wgnetstack "golang.zx2c4.com/wireguard/tun/netstack"
)

// benchTCP streams b.N chunks through one TCP connection and reports the
// goodput, counting until the receiver has read the last byte.
func benchTCP(b *testing.B, dial func(context.Context, netip.AddrPort) (net.Conn, error),
	listen func(netip.AddrPort) (net.Listener, error), srv netip.AddrPort) {
	l, err := listen(srv)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			got <- -1
			return
		}
		n, _ := io.Copy(io.Discard, c)
		c.Close()
		got <- n
	}()
	c, err := dial(context.Background(), srv)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 256<<10)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	c.Close()
	n := <-got
	b.StopTimer()
	if n != int64(b.N)*int64(len(buf)) {
		b.Fatalf("received %d of %d bytes", n, b.N*len(buf))
	}
	b.ReportMetric(float64(n)*8/b.Elapsed().Seconds()/1e9, "Gbit/s")
}

// BenchmarkNetstackPairTCP: two of our Nets back to back, one TCP stream.
func BenchmarkNetstackPairTCP(b *testing.B) {
	p := newPair(b, Options{}, nil)
	benchTCP(b, p.a.DialTCPAddrPort, p.b.ListenTCPAddrPort, netip.AddrPortFrom(addrB4, 5201))
	reportPairStats(b, p)
}

func reportPairStats(b *testing.B, p *pair) {
	sa, sb := p.a.Stats(), p.b.Stats()
	if sa.GSOPackets > 0 {
		b.ReportMetric(float64(sa.GSOSegments)/float64(sa.GSOPackets), "segs/gso")
	}
	if sb.TCPSegmentsReceived > 0 {
		b.ReportMetric(float64(sb.PacketsIn)/float64(sb.TCPSegmentsReceived), "pkts/gro")
	}
	b.ReportMetric(float64(sa.TCPRetransmits), "retrans")
}

// BenchmarkNetstackPairTCPVariants measures the tuning choices behind the
// defaults (see applyTCPOptions).
// The loss variants drop every 1000th packet in the pump, standing in for
// a tunnel whose UDP sockets overflow now and then.
func BenchmarkNetstackPairTCPVariants(b *testing.B) {
	for _, v := range []struct {
		name string
		opts Options
		loss int // drop one packet in loss; 0: none
	}{
		{"reno", Options{congestionControl: "reno"}, 0},
		{"cubic", Options{congestionControl: "cubic"}, 0},
		{"reno-norack", Options{congestionControl: "reno", disableRACK: true}, 0},
		{"cubic-norack", Options{congestionControl: "cubic", disableRACK: true}, 0},
		{"loss-reno", Options{congestionControl: "reno"}, 1000},
		{"loss-cubic", Options{congestionControl: "cubic"}, 1000},
		{"loss-reno-norack", Options{congestionControl: "reno", disableRACK: true}, 1000},
		{"loss-cubic-norack", Options{congestionControl: "cubic", disableRACK: true}, 1000},
		{"nogso", Options{disableGSO: true}, 0},
		{"queue128", Options{queueLen: 128}, 0},
		{"queue256", Options{queueLen: 256}, 0},
		{"queue512", Options{queueLen: 512}, 0},
		{"queue1024", Options{queueLen: 1024}, 0},
		{"queue4096", Options{queueLen: 4096}, 0},
		{"loss-queue256", Options{queueLen: 256}, 1000},
		{"verify", Options{verifyChecksums: true}, 0},
	} {
		b.Run(v.name, func(b *testing.B) {
			var filter func([]byte) bool
			if v.loss > 0 {
				var n atomic.Int64
				filter = func([]byte) bool { return n.Add(1)%int64(v.loss) != 0 }
			}
			p := newPair(b, v.opts, filter)
			benchTCP(b, p.a.DialTCPAddrPort, p.b.ListenTCPAddrPort, netip.AddrPortFrom(addrB4, 5201))
			reportPairStats(b, p)
		})
	}
}

// BenchmarkWireguardGoNetstackPairTCP is the same setup with wireguard-go's
// tun/netstack, for comparison in one run.
func BenchmarkWireguardGoNetstackPairTCP(b *testing.B) {
	devA, netA, err := wgnetstack.CreateNetTUN([]netip.Addr{addrA4}, nil, DefaultMTU)
	if err != nil {
		b.Fatal(err)
	}
	devB, netB, err := wgnetstack.CreateNetTUN([]netip.Addr{addrB4}, nil, DefaultMTU)
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); pump(b, devA, devB, nil) }()
	go func() { defer wg.Done(); pump(b, devB, devA, nil) }()
	defer func() { devA.Close(); devB.Close(); wg.Wait() }()
	benchTCP(b,
		func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
			return netA.DialContextTCPAddrPort(ctx, ap)
		},
		func(ap netip.AddrPort) (net.Listener, error) { return netB.ListenTCPAddrPort(ap) },
		netip.AddrPortFrom(addrB4, 5201))
}
