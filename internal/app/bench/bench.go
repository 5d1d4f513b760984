// Package bench measures TCP throughput through a tunnel: it is the engine
// behind `fips-go bench` and the side-by-side comparison with wireguard-go
// in tests/, so both are measured by the same code.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Options for one measurement.
type Options struct {
	Duration time.Duration // default 10s
	Streams  int           // parallel TCP connections, default 1
	// Progress, if set, is called about once a second with the bytes moved so far.
	Progress func(elapsed time.Duration, bytes uint64)
}

// Result is what a run measured.
type Result struct {
	Bytes    uint64
	Elapsed  time.Duration
	CPU      time.Duration // user+system CPU of this process during the run
	MaxRSSKB int64         // peak resident set of this process (ever, not just the run)
}

// Gbps is the throughput in Gbit/s.
func (r Result) Gbps() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Bytes) * 8 / r.Elapsed.Seconds() / 1e9
}

// CPUPerGB is CPU seconds spent per gigabyte moved.
func (r Result) CPUPerGB() float64 {
	if r.Bytes == 0 {
		return 0
	}
	return r.CPU.Seconds() / (float64(r.Bytes) / 1e9)
}

// Dial opens one stream towards the sink.
type Dial func(ctx context.Context) (net.Conn, error)

// TCP runs Streams senders writing to connections from dial, while accept
// (the listener on the far side) drains them, for Duration. The bytes
// counted are the ones the receiving side read.
func TCP(ctx context.Context, ln net.Listener, dial Dial, o Options) (Result, error) {
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.Streams <= 0 {
		o.Streams = 1
	}
	var received atomic.Uint64
	var wg sync.WaitGroup
	errc := make(chan error, 2*o.Streams)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	go func() {
		for range o.Streams {
			c, err := ln.Accept()
			if err != nil {
				errc <- fmt.Errorf("accept: %w", err)
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				drain(runCtx, c, &received)
			}()
		}
	}()

	cpu0 := CPUTime()
	start := time.Now()
	conns := make([]net.Conn, 0, o.Streams)
	for range o.Streams {
		c, err := dial(runCtx)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return Result{}, fmt.Errorf("dial: %w", err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		wg.Add(1)
		go func(c net.Conn) {
			defer wg.Done()
			if err := fill(runCtx, c); err != nil {
				errc <- err
			}
		}(c)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	deadline := time.NewTimer(o.Duration)
	defer deadline.Stop()
loop:
	for {
		select {
		case <-tick.C:
			if o.Progress != nil {
				o.Progress(time.Since(start), received.Load())
			}
		case <-deadline.C:
			break loop
		case err := <-errc:
			cancel()
			wg.Wait()
			return Result{}, err
		case <-ctx.Done():
			break loop
		}
	}
	res := Result{Bytes: received.Load(), Elapsed: time.Since(start), CPU: CPUTime() - cpu0}
	cancel()
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
	res.MaxRSSKB = maxRSSKB()
	return res, nil
}

func fill(ctx context.Context, c net.Conn) error {
	buf := make([]byte, 128<<10)
	for ctx.Err() == nil {
		if _, err := c.Write(buf); err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("write: %w", err)
		}
	}
	return nil
}

func drain(ctx context.Context, c net.Conn, n *atomic.Uint64) {
	defer c.Close()
	go func() {
		<-ctx.Done()
		c.Close()
	}()
	buf := make([]byte, 256<<10)
	for {
		k, err := c.Read(buf)
		n.Add(uint64(k))
		if err != nil {
			return
		}
	}
}
