package pcap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/fips-go/fips-go/tun"
	"github.com/fips-go/fips-go/tun/memtun"
)

var (
	hostA4 = netip.MustParseAddrPort("10.0.0.1:1234")
	hostB4 = netip.MustParseAddrPort("10.0.0.2:5678")
	hostA6 = netip.MustParseAddr("fd00::1")
	hostB6 = netip.MustParseAddr("fd00::2")
)

// outbound and inbound are the packets the tests send each way: IPv4 UDP
// and IPv6 ICMP, with payloads that name their direction and number.
func outbound(i int) []byte {
	if i%2 == 0 {
		return memtun.BuildUDPv4(hostA4, hostB4, fmt.Appendf(nil, "out %d", i))
	}
	return memtun.BuildICMPv6Echo(hostA6, hostB6, false, 7, uint16(i), fmt.Appendf(nil, "out %d", i))
}

func inbound(i int) []byte {
	if i%2 == 0 {
		return memtun.BuildUDPv4(hostB4, hostA4, fmt.Appendf(nil, "in %d", i))
	}
	return memtun.BuildICMPv6Echo(hostB6, hostA6, true, 7, uint16(i), fmt.Appendf(nil, "in %d", i))
}

// readBufs is a read batch with the data path's headroom.
func readBufs(n int) ([][]byte, []int) {
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, tun.Headroom+memtun.DefaultMTU)
	}
	return bufs, make([]int, n)
}

// withHeadroom puts each packet behind tun.Headroom bytes, as the data
// path writes them.
func withHeadroom(pkts ...[]byte) [][]byte {
	out := make([][]byte, len(pkts))
	for i, p := range pkts {
		out[i] = append(make([]byte, tun.Headroom), p...)
	}
	return out
}

func TestWrapRecordsBothDirections(t *testing.T) {
	mem := memtun.New("", 0, 0)
	var file bytes.Buffer
	now, at := stepClock()
	w, err := NewWriter(&file, now)
	if err != nil {
		t.Fatal(err)
	}
	dev := Wrap(mem, w)

	// Outbound: what the TUN hands over comes out of Read unchanged.
	for i := range 3 {
		if err := mem.Inject(outbound(i)); err != nil {
			t.Fatal(err)
		}
	}
	bufs, sizes := readBufs(8)
	n, err := dev.Read(bufs, sizes, tun.Headroom)
	if err != nil || n != 3 {
		t.Fatalf("Read: %d, %v", n, err)
	}
	for i := range n {
		if got := bufs[i][tun.Headroom : tun.Headroom+sizes[i]]; !bytes.Equal(got, outbound(i)) {
			t.Fatalf("read packet %d changed: %x", i, got)
		}
	}

	// Inbound: what the data path writes reaches the TUN unchanged.
	if n, err := dev.Write(withHeadroom(inbound(0), inbound(1)), tun.Headroom); err != nil || n != 2 {
		t.Fatalf("Write: %d, %v", n, err)
	}
	for i := range 2 {
		got, err := mem.Next(context.Background())
		if err != nil || !bytes.Equal(got, inbound(i)) {
			t.Fatalf("written packet %d: %x, %v", i, got, err)
		}
	}

	// The batch on the file was flushed with the Write, before any Close.
	c := parse(t, file.Bytes())
	want := [][]byte{outbound(0), outbound(1), outbound(2), inbound(0), inbound(1)}
	if len(c.records) != len(want) {
		t.Fatalf("%d records, want %d", len(c.records), len(want))
	}
	for i, r := range c.records {
		ts := at(0)
		if i >= 3 {
			ts = at(1)
		}
		if !bytes.Equal(r.data, want[i]) || r.orig != r.incl || !r.ts.Equal(ts) {
			t.Errorf("record %d: %x (orig %d) at %v, want %x at %v", i, r.data, r.orig, r.ts, want[i], ts)
		}
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Next(context.Background()); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("wrapped device still open after Close: %v", err)
	}
}

// TestWrapConcurrent has the TUN's reader and writer record at once, as
// the data path does; run it with -race.
func TestWrapConcurrent(t *testing.T) {
	const rounds = 200
	mem := memtun.NewWithOptions(memtun.Options{QueueLen: 4 * rounds, BatchSize: 4})
	var file bytes.Buffer
	w, err := NewWriter(&file, nil)
	if err != nil {
		t.Fatal(err)
	}
	dev := Wrap(mem, w)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Go(func() { // the TUN: injects outbound, drains inbound
		for i := range rounds {
			if err := mem.Inject(outbound(i)); err != nil {
				errs <- err
				return
			}
			if _, err := mem.Next(context.Background()); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Go(func() { // the TUN reader
		bufs, sizes := readBufs(4)
		for got := 0; got < rounds; {
			n, err := dev.Read(bufs, sizes, tun.Headroom)
			if err != nil {
				errs <- err
				return
			}
			got += n
		}
	})
	wg.Go(func() { // the TUN writer
		for i := range rounds {
			if _, err := dev.Write(withHeadroom(inbound(i)), tun.Headroom); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	// Each direction's records are all there, whole and in order, however
	// the two goroutines interleaved.
	var in, out int
	for k, r := range parse(t, file.Bytes()).records {
		switch {
		case out < rounds && bytes.Equal(r.data, outbound(out)):
			out++
		case in < rounds && bytes.Equal(r.data, inbound(in)):
			in++
		default:
			t.Fatalf("record %d (%x) is neither outbound %d nor inbound %d", k, r.data, out, in)
		}
	}
	if in != rounds || out != rounds {
		t.Fatalf("recorded %d inbound and %d outbound, want %d each", in, out, rounds)
	}
}

// TestWriteErrorKeepsDataPath fills the capture's disk after a few
// packets: the capture stops with the error kept, and traffic flows on.
func TestWriteErrorKeepsDataPath(t *testing.T) {
	mem := memtun.New("", 0, 0)
	fw := &failWriter{limit: 200}
	w, err := NewWriter(fw, nil)
	if err != nil {
		t.Fatal(err)
	}
	dev := Wrap(mem, w)
	bufs, sizes := readBufs(1)
	for i := range 20 {
		if err := mem.Inject(outbound(i)); err != nil {
			t.Fatal(err)
		}
		n, err := dev.Read(bufs, sizes, tun.Headroom)
		if err != nil || n != 1 || !bytes.Equal(bufs[0][tun.Headroom:tun.Headroom+sizes[0]], outbound(i)) {
			t.Fatalf("read %d: %d, %v", i, n, err)
		}
		if n, err := dev.Write(withHeadroom(inbound(i)), tun.Headroom); err != nil || n != 1 {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
		if got, err := mem.Next(context.Background()); err != nil || !bytes.Equal(got, inbound(i)) {
			t.Fatalf("written packet %d: %x, %v", i, got, err)
		}
	}
	if err := w.Err(); !errors.Is(err, errDiskFull) {
		t.Fatalf("Err: %v, want %v", err, errDiskFull)
	}
	// Once failed, the capture leaves the destination alone.
	fw.mu.Lock()
	failed, kept := fw.failed, fw.buf.Len()
	fw.mu.Unlock()
	if failed != 1 {
		t.Errorf("%d writes refused, want the destination left alone after the first", failed)
	}
	if kept <= 24 {
		t.Errorf("%d bytes reached the destination, want records before it filled", kept)
	}
	if err := dev.Close(); err != nil {
		t.Fatalf("Close: %v (a capture error is not the device's)", err)
	}
	if err := w.Close(); !errors.Is(err, errDiskFull) {
		t.Fatalf("Close of the writer: %v, want %v", err, errDiskFull)
	}
}

func TestWrapNilWriterIsTheDevice(t *testing.T) {
	mem := memtun.New("", 0, 0)
	if got := Wrap(mem, nil); got != tun.Device(mem) {
		t.Fatalf("Wrap(dev, nil) = %T, want the device itself", got)
	}
}

// sizedTUN is a memtun with the kernel TUN's SetGSOMaxSize.
type sizedTUN struct {
	*memtun.Device
	size int
}

func (s *sizedTUN) SetGSOMaxSize(size int) error { s.size = size; return nil }

func TestWrapKeepsSetGSOMaxSize(t *testing.T) {
	w, err := NewWriter(&bytes.Buffer{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	inner := &sizedTUN{Device: memtun.New("", 0, 0)}
	g, ok := Wrap(inner, w).(gsoSizer)
	if !ok {
		t.Fatal("the wrapper hides SetGSOMaxSize")
	}
	if err := g.SetGSOMaxSize(12345); err != nil || inner.size != 12345 {
		t.Fatalf("SetGSOMaxSize: %v, inner has %d", err, inner.size)
	}
	if _, ok := Wrap(memtun.New("", 0, 0), w).(gsoSizer); ok {
		t.Fatal("the wrapper claims SetGSOMaxSize its device does not have")
	}
}

// liar is a Device whose Read reports more packets and bigger sizes than
// it was given room for.
type liar struct{ *memtun.Device }

func (l liar) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	for i := range sizes {
		sizes[i] = 1 << 20
	}
	return len(bufs) + 5, nil
}

func TestWrapSurvivesLyingDevice(t *testing.T) {
	var file bytes.Buffer
	w, err := NewWriter(&file, func() time.Time { return time.Unix(1, 0) })
	if err != nil {
		t.Fatal(err)
	}
	dev := Wrap(liar{memtun.New("", 0, 0)}, w)
	bufs, sizes := readBufs(2)
	if n, _ := dev.Read(bufs, sizes, tun.Headroom); n != 7 {
		t.Fatalf("Read returned %d, want the inner device's 7 passed on", n)
	}
	if n := len(parse(t, file.Bytes()).records); n != 0 {
		t.Fatalf("%d records from an impossible count", n)
	}
	dev = Wrap(liarSizes{memtun.New("", 0, 0)}, w)
	if n, _ := dev.Read(bufs, sizes, tun.Headroom); n != 2 {
		t.Fatalf("Read returned %d", n)
	}
	for _, r := range parse(t, file.Bytes()).records {
		if int(r.orig) != memtun.DefaultMTU {
			t.Fatalf("record of %d bytes, want the %d the buffer held", r.orig, memtun.DefaultMTU)
		}
	}
}

// liarSizes reports sizes bigger than its buffers.
type liarSizes struct{ *memtun.Device }

func (l liarSizes) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	for i := range bufs {
		sizes[i] = 1 << 20
	}
	return len(bufs), nil
}

// rewriter is a Device whose Write rewrites the packets in place, as the
// kernel TUN does to the head of each run it coalesces.
type rewriter struct{ *memtun.Device }

func (r rewriter) Write(bufs [][]byte, offset int) (int, error) {
	for _, b := range bufs {
		b[offset+2], b[offset+3] = 0xff, 0xff // the IPv4 total length
	}
	return len(bufs), nil
}

// TestWrapRecordsWritesAsGiven checks that a batch is recorded before the
// TUN may change it: the capture holds the packets the tunnel delivered.
func TestWrapRecordsWritesAsGiven(t *testing.T) {
	var file bytes.Buffer
	w, err := NewWriter(&file, nil)
	if err != nil {
		t.Fatal(err)
	}
	dev := Wrap(rewriter{memtun.New("", 0, 0)}, w)
	if _, err := dev.Write(withHeadroom(inbound(0), inbound(2)), tun.Headroom); err != nil {
		t.Fatal(err)
	}
	r := parse(t, file.Bytes()).records
	if len(r) != 2 || !bytes.Equal(r[0].data, inbound(0)) || !bytes.Equal(r[1].data, inbound(2)) {
		t.Fatalf("recorded %d packets, not the ones given to Write", len(r))
	}
}
