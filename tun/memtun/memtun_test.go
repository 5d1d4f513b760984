package memtun

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/fips-go/fips-go/tun"
)

func bufs(n, size int) ([][]byte, []int) {
	b := make([][]byte, n)
	for i := range b {
		b[i] = make([]byte, size)
	}
	return b, make([]int, n)
}

func TestInjectReadBatch(t *testing.T) {
	d := NewWithOptions(Options{MTU: 1400, QueueLen: 8, BatchSize: 3})
	defer d.Close()
	if ev := <-d.Events(); ev != tun.EventUp {
		t.Fatalf("first event %v, want EventUp", ev)
	}
	for i := range 5 {
		if err := d.Inject([]byte{0x45, byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	b, sizes := bufs(8, 100)
	n, err := d.Read(b, sizes, tun.Headroom)
	if err != nil || n != 3 {
		t.Fatalf("Read = %d, %v; want 3 (BatchSize)", n, err)
	}
	n, err = d.Read(b, sizes, tun.Headroom)
	if err != nil || n != 2 {
		t.Fatalf("second Read = %d, %v; want 2", n, err)
	}
	if got := b[1][tun.Headroom : tun.Headroom+sizes[1]]; !bytes.Equal(got, []byte{0x45, 4}) {
		t.Fatalf("packet order: got %x", got)
	}
	if s := d.Stats(); s.Injected != 5 || s.Read != 5 {
		t.Fatalf("stats %+v", s)
	}
}

func TestInjectFullQueue(t *testing.T) {
	d := New("t", 0, 2)
	defer d.Close()
	for range 2 {
		if err := d.Inject([]byte{1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Inject([]byte{1}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("Inject into full queue: %v, want ErrQueueFull", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := d.InjectContext(ctx, []byte{1}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("InjectContext into full queue: %v", err)
	}
	if err := d.Inject(nil); err == nil {
		t.Fatal("empty packet accepted")
	}
}

func TestShortBuffer(t *testing.T) {
	d := New("t", 0, 4)
	defer d.Close()
	_ = d.Inject(make([]byte, 200))
	_ = d.Inject(make([]byte, 10))
	b, sizes := bufs(4, 100)
	if _, err := d.Read(b, sizes, 0); !errors.Is(err, io.ErrShortBuffer) {
		t.Fatalf("Read of oversize packet: %v, want io.ErrShortBuffer", err)
	}
	n, err := d.Read(b, sizes, 0)
	if err != nil || n != 1 || sizes[0] != 10 {
		t.Fatalf("Read after drop = %d, %v, size %d", n, err, sizes[0])
	}
	if d.Stats().Dropped != 1 {
		t.Fatalf("dropped = %d, want 1", d.Stats().Dropped)
	}
	if _, err := d.Read(b, sizes[:1], 0); err == nil {
		t.Fatal("Read with too few sizes accepted")
	}
}

func TestWriteBackpressureAndNext(t *testing.T) {
	d := New("t", 0, 2)
	defer d.Close()
	pkts := [][]byte{{0, 0, 1}, {0, 0, 2}, {0, 0, 3}}
	done := make(chan error, 1)
	go func() {
		_, err := d.Write(pkts, 2)
		done <- err
	}()
	// The third packet cannot be queued until Next takes one.
	ctx := context.Background()
	for i := range 3 {
		p, err := d.Next(ctx)
		if err != nil || len(p) != 1 || p[0] != byte(i+1) {
			t.Fatalf("Next = %x, %v", p, err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := d.Write([][]byte{{1}}, 2); err == nil {
		t.Fatal("offset beyond buffer accepted")
	}
}

func TestClose(t *testing.T) {
	d := New("t", 0, 1)
	readErr := make(chan error, 1)
	go func() {
		b, sizes := bufs(1, 100)
		_, err := d.Read(b, sizes, 0)
		readErr <- err
	}()
	_, _ = d.Write([][]byte{{1}}, 0) // fills the outbound queue
	writeErr := make(chan error, 1)
	go func() {
		_, err := d.Write([][]byte{{2}}, 0)
		writeErr <- err
	}()
	<-d.Events()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-readErr; !errors.Is(err, os.ErrClosed) {
		t.Fatalf("blocked Read after Close: %v", err)
	}
	if err := <-writeErr; !errors.Is(err, os.ErrClosed) {
		t.Fatalf("blocked Write after Close: %v", err)
	}
	if _, ok := <-d.Events(); ok {
		t.Fatal("Events not closed")
	}
	if err := d.Inject([]byte{1}); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Inject after Close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestBuilders(t *testing.T) {
	a4, b4 := netip.MustParseAddrPort("192.0.2.1:1000"), netip.MustParseAddrPort("192.0.2.2:2000")
	a6, b6 := netip.MustParseAddrPort("[2001:db8::1]:1000"), netip.MustParseAddrPort("[2001:db8::2]:2000")
	for _, p := range [][]byte{
		BuildUDPv4(a4, b4, []byte("x")),
		BuildUDPv6(a6, b6, []byte("odd")),
		BuildICMPv4Echo(a4.Addr(), b4.Addr(), false, 1, 2, []byte("ping")),
		BuildICMPv6Echo(a6.Addr(), b6.Addr(), true, 1, 2, []byte("pong")),
	} {
		if p == nil {
			t.Fatal("builder returned nil for valid input")
		}
		if err := VerifyPacket(p); err != nil {
			t.Fatal(err)
		}
	}
	if BuildUDPv4(a6, b6, nil) != nil || BuildUDPv6(a4, b4, nil) != nil ||
		BuildICMPv4Echo(a6.Addr(), b6.Addr(), false, 0, 0, nil) != nil || BuildICMPv6Echo(a4.Addr(), b4.Addr(), false, 0, 0, nil) != nil {
		t.Fatal("builder accepted the wrong family")
	}
	if _, err := BuildUDP(a4, b6, nil); err == nil {
		t.Fatal("mixed families accepted")
	}
}
