// Package conntest is the conformance suite every conn.Bind implementation
// passes: opening and closing, datagram integrity and order through the
// batched paths, endpoints, IPv6, and shutdown.
package conntest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn"
)

const (
	// rxBufSize is the receive buffer per datagram the suite offers.
	rxBufSize = 2048
	// rxQueue bounds what a peer's readers buffer for the test.
	rxQueue = 8192
	// patience is how long the suite waits for a datagram before it calls
	// it lost. It is a hang guard, not a timing assertion: a lossless bind
	// delivers in microseconds.
	patience = 10 * time.Second
)

// Run runs the suite. newPair returns two fresh, closed binds that reach
// each other without loss at 127.0.0.1 on the ports they open (and at ::1
// when they open a second, IPv6, receive function). Run closes them.
func Run(t *testing.T, newPair func(t *testing.T) (a, b conn.Bind)) {
	tests := []struct {
		name string
		fn   func(t *testing.T, a, b conn.Bind)
	}{
		{"OpenPortZero", testOpenPortZero},
		{"OpenTwice", testOpenTwice},
		{"CloseTwice", testCloseTwice},
		{"Reopen", testReopen},
		{"PortInUse", testPortInUse},
		{"FixedPort", testFixedPort},
		{"RoundTrip", testRoundTrip},
		{"Batch", testBatch},
		{"MixedSizes", testMixedSizes},
		{"ZeroLength", testZeroLength},
		{"LargerThanBatch", testLargerThanBatch},
		{"Oversize", testOversize},
		{"IPv6", testIPv6},
		{"FamilySwitch", testFamilySwitch},
		{"CloseUnblocksReceive", testCloseUnblocksReceive},
		{"SendAfterClose", testSendAfterClose},
		{"BadEndpoint", testBadEndpoint},
		{"ConcurrentSend", testConcurrentSend},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newPair(t)
			t.Cleanup(func() { a.Close(); b.Close() })
			tc.fn(t, a, b)
		})
	}
}

// datagram is one received datagram, copied out of the receive buffers.
type datagram struct {
	data []byte
	ep   conn.Endpoint
}

// peer is an open bind with a reader goroutine per receive function.
type peer struct {
	t    *testing.T
	bind conn.Bind
	port uint16
	fns  int
	rx   chan datagram
	done chan struct{}
	wg   sync.WaitGroup
	// oversize counts reads that returned ErrOversize.
	oversize atomic.Uint64
}

// open opens b on port 0 and starts its readers; cleanup closes it and
// waits for them.
func open(t *testing.T, b conn.Bind) *peer {
	t.Helper()
	fns, port, err := b.Open(0)
	if err != nil {
		t.Fatalf("Open(0): %v", err)
	}
	p := &peer{t: t, bind: b, port: port, fns: len(fns), rx: make(chan datagram, rxQueue), done: make(chan struct{})}
	for _, fn := range fns {
		p.wg.Add(1)
		go p.read(fn)
	}
	t.Cleanup(func() {
		close(p.done)
		b.Close()
		p.wg.Wait()
	})
	return p
}

func (p *peer) read(fn conn.ReceiveFunc) {
	defer p.wg.Done()
	n := p.bind.BatchSize()
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, rxBufSize)
	}
	sizes := make([]int, n)
	eps := make([]conn.Endpoint, n)
	for {
		got, err := fn(bufs, sizes, eps)
		for i := range got {
			d := datagram{data: append([]byte{}, bufs[i][:sizes[i]]...), ep: eps[i]}
			select {
			case p.rx <- d:
			case <-p.done:
				return
			}
		}
		if errors.Is(err, conn.ErrOversize) {
			if got != 0 {
				p.t.Errorf("receive: %d datagrams along with ErrOversize, want 0", got)
			}
			p.oversize.Add(1)
			continue
		}
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				p.t.Errorf("receive: %v (want only errors wrapping net.ErrClosed here)", err)
			}
			return
		}
	}
}

// v4 and v6 are the peer's loopback addresses.
func (p *peer) v4() netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), p.port)
}
func (p *peer) v6() netip.AddrPort { return netip.AddrPortFrom(netip.IPv6Loopback(), p.port) }

// expect waits for n datagrams.
func (p *peer) expect(n int) []datagram {
	p.t.Helper()
	out := make([]datagram, 0, n)
	timeout := time.NewTimer(patience)
	defer timeout.Stop()
	for len(out) < n {
		select {
		case d := <-p.rx:
			out = append(out, d)
		case <-timeout.C:
			p.t.Fatalf("received %d of %d datagrams before giving up", len(out), n)
		}
	}
	return out
}

func send(t *testing.T, b conn.Bind, bufs [][]byte, ep conn.Endpoint) {
	t.Helper()
	if err := b.Send(bufs, ep); err != nil {
		t.Fatalf("Send(%d datagrams to %v): %v", len(bufs), ep, err)
	}
}

// payloads builds datagrams of the given sizes; each carries its index so
// reordering, loss and corruption show.
func payloads(sizes []int) [][]byte {
	bufs := make([][]byte, len(sizes))
	for i, n := range sizes {
		bufs[i] = payload(uint32(i), n)
	}
	return bufs
}

// payload is n bytes: the index (when it fits) and then a pattern that
// depends on both index and offset.
func payload(idx uint32, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(uint32(j)*7 + idx*13)
	}
	if n >= 4 {
		binary.BigEndian.PutUint32(b, idx)
	}
	return b
}

// checkSame fails unless got holds exactly want, in order, each from from.
func checkSame(t *testing.T, got []datagram, want [][]byte, from netip.AddrPort) {
	t.Helper()
	for i := range want {
		if string(got[i].data) != string(want[i]) {
			t.Fatalf("datagram %d: got %d bytes %s, want %d bytes %s", i,
				len(got[i].data), head(got[i].data), len(want[i]), head(want[i]))
		}
		if got[i].ep.Dst != from {
			t.Fatalf("datagram %d: endpoint %v, want %v", i, got[i].ep.Dst, from)
		}
	}
}

func head(b []byte) string {
	if len(b) > 8 {
		b = b[:8]
	}
	return fmt.Sprintf("%x…", b)
}
