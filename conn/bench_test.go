package conn_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn"
)

const (
	benchBatch = 128
	benchSize  = 1420
)

// benchLoopback measures Send of a batch of 1420-byte datagrams plus the
// receives that take it in, both on this goroutine: the cost per byte of
// the bind on both ends, without scheduler noise.
func benchLoopback(b *testing.B, a, r conn.Bind) {
	if _, _, err := a.Open(0); err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	fns, port, err := r.Open(0)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ep := conn.Endpoint{Dst: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)}
	batch := make([][]byte, benchBatch)
	for i := range batch {
		batch[i] = make([]byte, benchSize)
	}
	bufs := make([][]byte, r.BatchSize())
	for i := range bufs {
		bufs[i] = make([]byte, 2048)
	}
	sizes, eps := make([]int, len(bufs)), make([]conn.Endpoint, len(bufs))
	// A lost datagram would block the receive forever; closing the bind
	// turns that into an error.
	guard := time.AfterFunc(5*time.Minute, func() { r.Close() })
	defer guard.Stop()
	b.SetBytes(benchBatch * benchSize)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := a.Send(batch, ep); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < benchBatch; {
			n, err := fns[0](bufs, sizes, eps)
			if err != nil {
				b.Fatal(err)
			}
			got += n
		}
	}
	b.StopTimer()
	reportSyscalls(b, a, r)
}

// reportSyscalls adds messages per batch on each side: the syscall
// entries the offloads save.
func reportSyscalls(b *testing.B, a, r conn.Bind) {
	sa, ok1 := a.(conn.StatsBind)
	sr, ok2 := r.(conn.StatsBind)
	if !ok1 || !ok2 {
		return
	}
	tx, rx := sa.Stats(), sr.Stats()
	if tx.TxPackets > 0 && rx.RxPackets > 0 {
		b.ReportMetric(float64(tx.TxMessages)*benchBatch/float64(tx.TxPackets), "txmsgs/batch")
		b.ReportMetric(float64(rx.RxMessages)*benchBatch/float64(rx.RxPackets), "rxmsgs/batch")
	}
}

func BenchmarkLoopbackStd(b *testing.B) {
	benchLoopback(b, conn.NewStd(conn.Options{}), conn.NewStd(conn.Options{}))
}
