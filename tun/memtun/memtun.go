// Package memtun is an in-memory TUN device for tests: packets "from the
// OS" are injected and come out of Read, packets the data path writes are
// taken with Next. Both queues are bounded.
package memtun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/fips-go/fips-go/tun"
)

// ErrQueueFull is returned by Inject when the inbound queue is full.
var ErrQueueFull = errors.New("memtun: inbound queue full")

// Defaults for zero Options fields.
const (
	DefaultMTU       = 1420
	DefaultQueueLen  = 1024
	DefaultBatchSize = 128
	maxPacket        = 65535
)

// Options configure a Device; the zero value works.
type Options struct {
	Name      string // default "memtun"
	MTU       int    // reported by MTU(); default 1420
	QueueLen  int    // capacity of each of the two queues, in packets; default 1024
	BatchSize int    // most packets one Read returns; default 128
}

// Device is an in-memory tun.Device.
//
// Inbound (Inject -> Read): Inject never blocks, it fails with ErrQueueFull
// so a test notices a stuck reader; InjectContext waits for room instead.
// Outbound (Write -> Next): Write applies backpressure, it blocks while the
// queue is full until Next makes room or the device is closed.
type Device struct {
	opts   Options
	mtu    atomic.Int32 // MTU reports it; SetMTU changes it
	in     chan []byte
	out    chan []byte
	evMu   sync.Mutex // orders SetMTU's sends before Close closes events
	events chan tun.Event
	done   chan struct{}
	close  sync.Once

	readMu sync.Mutex // serialises Read so one batch is contiguous in queue order

	stats struct {
		injected, read, written, dropped atomic.Uint64
	}
}

var _ tun.Device = (*Device)(nil)

// New returns a Device named name with the given MTU and queue capacity
// (zero values pick the defaults).
func New(name string, mtu, queueLen int) *Device {
	return NewWithOptions(Options{Name: name, MTU: mtu, QueueLen: queueLen})
}

// NewWithOptions returns a Device configured by opts.
func NewWithOptions(opts Options) *Device {
	if opts.Name == "" {
		opts.Name = "memtun"
	}
	if opts.MTU <= 0 {
		opts.MTU = DefaultMTU
	}
	if opts.QueueLen <= 0 {
		opts.QueueLen = DefaultQueueLen
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	d := &Device{
		opts:   opts,
		in:     make(chan []byte, opts.QueueLen),
		out:    make(chan []byte, opts.QueueLen),
		events: make(chan tun.Event, 16),
		done:   make(chan struct{}),
	}
	d.mtu.Store(int32(opts.MTU))
	d.events <- tun.EventUp
	return d
}

func checkPacket(pkt []byte) error {
	if len(pkt) == 0 || len(pkt) > maxPacket {
		return fmt.Errorf("memtun: packet of %d bytes (want 1..%d)", len(pkt), maxPacket)
	}
	return nil
}

// Inject queues a copy of pkt for Read, as if the OS had sent it. It returns
// ErrQueueFull when the inbound queue is full and os.ErrClosed after Close.
func (d *Device) Inject(pkt []byte) error {
	if err := checkPacket(pkt); err != nil {
		return err
	}
	select {
	case <-d.done:
		return os.ErrClosed
	default:
	}
	select {
	case d.in <- append([]byte(nil), pkt...):
		d.stats.injected.Add(1)
		return nil
	default:
		return ErrQueueFull
	}
}

// InjectContext is Inject that waits for room instead of failing.
func (d *Device) InjectContext(ctx context.Context, pkt []byte) error {
	if err := checkPacket(pkt); err != nil {
		return err
	}
	select {
	case d.in <- append([]byte(nil), pkt...):
		d.stats.injected.Add(1)
		return nil
	case <-d.done:
		return os.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Next returns the next packet the data path wrote, waiting until there is
// one, ctx is done, or the device is closed (os.ErrClosed). Packets written
// before Close are still returned after it.
func (d *Device) Next(ctx context.Context) ([]byte, error) {
	select {
	case p := <-d.out:
		return p, nil
	default:
	}
	select {
	case p := <-d.out:
		return p, nil
	case <-d.done:
		return nil, os.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Read implements tun.Device: it waits for at least one injected packet,
// then returns as many as are queued, up to len(bufs) and BatchSize. A
// packet larger than its buffer is dropped and counted; if it was the only
// one, Read returns an error wrapping io.ErrShortBuffer.
func (d *Device) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	if len(sizes) < len(bufs) {
		return 0, fmt.Errorf("memtun: %d sizes for %d buffers", len(sizes), len(bufs))
	}
	if offset < 0 {
		return 0, fmt.Errorf("memtun: negative offset %d", offset)
	}
	limit := min(len(bufs), d.opts.BatchSize)
	if limit == 0 {
		return 0, nil
	}
	d.readMu.Lock()
	defer d.readMu.Unlock()
	var p []byte
	select {
	case <-d.done:
		return 0, tun.ErrGone
	default:
	}
	select {
	case p = <-d.in:
	case <-d.done:
		return 0, tun.ErrGone
	}
	n := 0
	for {
		if offset > len(bufs[n]) || len(p) > len(bufs[n])-offset {
			d.stats.dropped.Add(1)
			if n == 0 {
				return 0, fmt.Errorf("memtun: packet of %d bytes, buffer has %d after offset %d: %w",
					len(p), len(bufs[n])-offset, offset, io.ErrShortBuffer)
			}
		} else {
			sizes[n] = copy(bufs[n][offset:], p)
			n++
		}
		if n == limit {
			break
		}
		select {
		case p = <-d.in:
			continue
		default:
		}
		break
	}
	d.stats.read.Add(uint64(n))
	return n, nil
}

// Write implements tun.Device: it queues a copy of each packet for Next,
// blocking while the outbound queue is full. It returns how many packets
// were queued and tun.ErrGone if the device was closed first.
func (d *Device) Write(bufs [][]byte, offset int) (int, error) {
	for i, b := range bufs {
		if offset < 0 || offset > len(b) {
			return i, fmt.Errorf("memtun: offset %d outside buffer %d of %d bytes", offset, i, len(b))
		}
		if err := checkPacket(b[offset:]); err != nil {
			return i, err
		}
		select {
		case d.out <- append([]byte(nil), b[offset:]...):
			d.stats.written.Add(1)
		case <-d.done:
			return i, tun.ErrGone
		}
	}
	return len(bufs), nil
}

// MTU implements tun.Device.
func (d *Device) MTU() (int, error) { return int(d.mtu.Load()), nil }

// SetMTU changes the MTU, as `ip link set mtu` does, and reports it with
// EventMTUUpdate. Inject does not enforce the MTU, so a test can also play a
// TUN that hands over a packet read before the change was announced.
func (d *Device) SetMTU(mtu int) {
	d.mtu.Store(int32(mtu))
	d.evMu.Lock()
	defer d.evMu.Unlock()
	select {
	case <-d.done:
		return // events is closed
	default:
	}
	select {
	case d.events <- tun.EventMTUUpdate:
	default: // a reader that lags sixteen events behind re-reads MTU anyway
	}
}

// Name implements tun.Device.
func (d *Device) Name() (string, error) { return d.opts.Name, nil }

// Events implements tun.Device: one EventUp, closed by Close.
func (d *Device) Events() <-chan tun.Event { return d.events }

// BatchSize implements tun.Device.
func (d *Device) BatchSize() int { return d.opts.BatchSize }

// File implements tun.Device; there is no file.
func (d *Device) File() *os.File { return nil }

// Close implements tun.Device: blocked Read and Write return tun.ErrGone
// (which wraps os.ErrClosed), InjectContext and Next return os.ErrClosed,
// and the Events channel is closed. Closing twice is
// not an error.
func (d *Device) Close() error {
	d.close.Do(func() {
		close(d.done)
		d.evMu.Lock()
		close(d.events)
		d.evMu.Unlock()
	})
	return nil
}

// Stats are the Device's cumulative counters.
type Stats struct {
	Injected uint64 // packets accepted by Inject
	Read     uint64 // packets returned by Read
	Written  uint64 // packets accepted by Write
	Dropped  uint64 // injected packets dropped because they did not fit a Read buffer
}

// Stats returns a snapshot of the counters.
func (d *Device) Stats() Stats {
	return Stats{
		Injected: d.stats.injected.Load(),
		Read:     d.stats.read.Load(),
		Written:  d.stats.written.Load(),
		Dropped:  d.stats.dropped.Load(),
	}
}
