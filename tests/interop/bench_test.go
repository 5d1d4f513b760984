package interop

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/app/bench"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
)

// benchDuration is how long one b.N iteration of BenchmarkNetstackPair
// sends; `-benchtime 1x` makes it one iteration per implementation.
const benchDuration = 5 * time.Second

// netstackPair is one implementation's two-node loopback setup, the one
// `fips-go bench` uses: netstack TUNs, UDP on 127.0.0.1, the first node
// initiating and sending.
type netstackPair struct {
	name string
	new  func(testing.TB) (sender, sink node)
}

var netstackPairs = []netstackPair{
	{"fips-go", func(t testing.TB) (node, node) { a, b := newFipsPair(t); return a, b }},
	{"wireguard-go", newWGPair},
}

// newWGPair is newFipsPair with wireguard-go devices and netstack.
func newWGPair(t testing.TB) (node, node) {
	a := newWGNode(t, netip.MustParseAddr("10.88.0.1"))
	b := newWGNode(t, netip.MustParseAddr("10.88.0.2"))
	lo := loopback(false)
	a.addPeer(t, b, netip.AddrPortFrom(lo, b.listenPort()), noise.PresharedKey{})
	b.addPeer(t, a, netip.AddrPortFrom(lo, a.listenPort()), noise.PresharedKey{})
	return a, b
}

// pairResult adds the peak Go heap during the run to bench's measurement.
type pairResult struct {
	bench.Result
	peakHeap uint64 // bytes of heap in use (objects + unused span space)
}

func (r *pairResult) add(o pairResult) {
	r.Bytes += o.Bytes
	r.Elapsed += o.Elapsed
	r.CPU += o.CPU
	r.peakHeap = max(r.peakHeap, o.peakHeap)
}

// measurePair runs one single-stream bench.TCP measurement from sender to
// a listener of sink on port, for d.
func measurePair(tb testing.TB, sender, sink node, port uint16, d time.Duration) pairResult {
	tb.Helper()
	at := netip.AddrPortFrom(sink.addr(), port)
	ln, err := sink.listenTCP(at)
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	runtime.GC()
	stop := sampleHeap()
	res, err := bench.TCP(context.Background(), ln, func(ctx context.Context) (net.Conn, error) {
		return sender.dialTCP(ctx, at)
	}, bench.Options{Duration: d, Streams: 1})
	peak := stop()
	if err != nil {
		tb.Fatalf("%s: %v", sender.name(), err)
	}
	if res.Bytes == 0 {
		tb.Fatalf("%s: no byte crossed the tunnel in %v", sender.name(), d)
	}
	return pairResult{Result: res, peakHeap: peak}
}

// sampleHeap polls the heap in use every 20 ms until the returned stop
// function is called, which returns the peak.
func sampleHeap() (stop func() uint64) {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
	}
	read := func() uint64 {
		metrics.Read(samples)
		return samples[0].Value.Uint64() + samples[1].Value.Uint64()
	}
	done := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		p := read()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				p = max(p, read())
			case <-done:
				peak <- max(p, read())
				return
			}
		}
	}()
	return func() uint64 {
		close(done)
		return <-peak
	}
}

// BenchmarkNetstackPair measures fips-go and wireguard-go side by side in
// the `fips-go bench` setup: two devices in this process with netstack
// TUNs, joined by UDP on loopback, one TCP stream through the tunnel via
// internal/app/bench, benchDuration per iteration. CPU-s/GB is this process's
// CPU time (both devices and both stacks) per 10^9 bytes received, and
// peak-heap-MiB the most Go heap in use while it ran. For a side-by-side
// table, run each a few times and compare the two with benchstat:
//
//	go test -run '^$' -bench NetstackPair -benchtime 1x -count 5 ./tests/interop/
func BenchmarkNetstackPair(b *testing.B) {
	for _, p := range netstackPairs {
		b.Run(p.name, func(b *testing.B) {
			leakcheck.Check(b)
			sender, sink := p.new(b)
			warmUp(b, sender, sink)
			var total pairResult
			b.ResetTimer()
			for i := range b.N {
				total.add(measurePair(b, sender, sink, uint16(5201+i%1000), benchDuration))
			}
			b.StopTimer()
			b.ReportMetric(total.Gbps(), "Gbit/s")
			b.ReportMetric(total.CPUPerGB(), "CPU-s/GB")
			b.ReportMetric(float64(total.peakHeap)/(1<<20), "peak-heap-MiB")
		})
	}
}
