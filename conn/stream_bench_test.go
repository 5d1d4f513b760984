package conn_test

import (
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/fips-go/fips-go/conn"
)

// BenchmarkStream sends datagrams of a full-size WireGuard data message
// over a loopback stream, a batch of 64 per Send, with at most 256 in
// flight so that the send queue never drops: the CPU per frame of the
// framing, the writer, the reader and the receive function, both ends in
// one process. Profile it with -cpuprofile and -memprofile.
func BenchmarkStream(b *testing.B) {
	for _, tr := range []conn.Transport{conn.TransportTCP, conn.TransportTLS} {
		b.Run(tr.String(), func(b *testing.B) { benchStream(b, tr) })
	}
}

func benchStream(b *testing.B, tr conn.Transport) {
	const size, batch, window = 1452, 64, 256
	srv := conn.NewStream(conn.StreamOptions{})
	defer srv.Close()
	port, err := srv.Listen(0)
	if err != nil {
		b.Fatal(err)
	}
	cli := conn.NewStream(conn.StreamOptions{})
	defer cli.Close()
	ep := conn.Endpoint{Dst: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port), Transport: tr}

	fn := srv.ReceiveFunc()
	bufs, sizes, eps := make([][]byte, 128), make([]int, 128), make([]conn.Endpoint, 128)
	for i := range bufs {
		bufs[i] = make([]byte, 2048)
	}
	// The server answers first, as a device does, so the connection is
	// proven and not closed after a handful of frames.
	if err := cli.Send([][]byte{{1}}, ep); err != nil {
		b.Fatal(err)
	}
	if _, err := fn(bufs, sizes, eps); err != nil {
		b.Fatal(err)
	}
	if err := srv.Send([][]byte{{2}}, eps[0]); err != nil {
		b.Fatal(err)
	}

	var got atomic.Int64
	progress := make(chan struct{}, 1)
	go func() {
		for {
			n, err := fn(bufs, sizes, eps)
			if err != nil {
				return
			}
			got.Add(int64(n))
			select {
			case progress <- struct{}{}:
			default:
			}
		}
	}()
	out := make([][]byte, batch)
	for i := range out {
		out[i] = make([]byte, size)
		out[i][0] = 4
	}
	b.SetBytes(size * batch)
	b.ReportAllocs()
	b.ResetTimer()
	sent := int64(0)
	for range b.N {
		for sent-got.Load() > window-batch {
			<-progress
		}
		if err := cli.Send(out, ep); err != nil {
			b.Fatal(err)
		}
		sent += batch
	}
	for got.Load() < sent {
		<-progress
	}
	b.StopTimer()
	st := cli.Stats()
	b.ReportMetric(float64(st.TxQueueDrops)/float64(b.N), "drops/op")
	b.ReportMetric(float64(st.TxFrames)/float64(max(1, st.TxWrites)), "frames/write")
	if st.TxQueueDrops != 0 {
		b.Fatalf("%d frames dropped: the window is larger than the queue", st.TxQueueDrops)
	}
}
