package tun

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// blockingPipe is a pipe whose read end the runtime's poller does not
// watch (its descriptor is blocking), as a TUN handed over blocking would
// be.
func blockingPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w = os.NewFile(uintptr(p[0]), "r"), os.NewFile(uintptr(p[1]), "w")
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

func pollablePipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// TestRawReadsOnlyOnNonblockingFiles: the raw calls are taken only where
// they cannot block (a pollable, non-blocking descriptor, as the TUN is);
// a blocking one keeps the ordinary calls, which may block.
func TestRawReadsOnlyOnNonblockingFiles(t *testing.T) {
	pr, pw := pollablePipe(t)
	if !newSplitReader(pr).calls.raw {
		t.Error("split reader on a non-blocking pipe: no raw reads")
	}
	if w := newGROWriter(pw, false); w == nil || !w.calls.raw {
		t.Error("GRO writer on a non-blocking pipe: no raw writes")
	}
	br, bw := blockingPipe(t)
	if newSplitReader(br).calls.raw {
		t.Error("split reader on a blocking pipe takes raw reads, which would hold a P while waiting")
	}
	if w := newGROWriter(bw, false); w == nil || w.calls.raw {
		t.Error("GRO writer on a blocking pipe takes raw writes")
	}
}

// TestRawSplitReadMatchesPlainRead: the same super-packets read with raw
// calls and with os.File.Read come out as the same segments.
func TestRawSplitReadMatchesPlainRead(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	pr, pw := pollablePipe(t)
	br, bw := blockingPipe(t)
	raw, plain := newSplitReader(pr), newSplitReader(br)
	bufs := func() ([][]byte, []int) {
		b := make([][]byte, 128)
		for i := range b {
			b[i] = make([]byte, Headroom+1600)
		}
		return b, make([]int, 128)
	}
	for range 30 {
		frame, _ := superFrame(t, rng)
		if _, err := pw.Write(frame); err != nil {
			t.Fatal(err)
		}
		if _, err := bw.Write(frame); err != nil {
			t.Fatal(err)
		}
		// A frame of more segments than there are buffers takes several
		// calls; both readers finish it before reading the next.
		for calls := 0; calls == 0 || raw.frame != nil; calls++ {
			rb, rs := bufs()
			pb, ps := bufs()
			rn, rerr := raw.read(rb, rs, Headroom)
			pn, perr := plain.read(pb, ps, Headroom)
			if rn != pn || (rerr == nil) != (perr == nil) {
				t.Fatalf("raw read %d, %v; plain read %d, %v", rn, rerr, pn, perr)
			}
			if rn == 0 {
				t.Fatalf("no segments from a %d-byte frame: %v", len(frame), rerr)
			}
			for i := range rn {
				if !bytes.Equal(rb[i][Headroom:Headroom+rs[i]], pb[i][Headroom:Headroom+ps[i]]) {
					t.Fatalf("segment %d differs", i)
				}
			}
			if (raw.frame == nil) != (plain.frame == nil) {
				t.Fatal("one reader finished the frame before the other")
			}
		}
	}
}

// TestRawSplitReadDeadlineAndClose: a raw read still ends at the file's
// read deadline (how the data path wakes its reader for an MTU change) and
// when the file is closed, which the data path must read as "TUN gone".
func TestRawSplitReadDeadlineAndClose(t *testing.T) {
	pr, _ := pollablePipe(t)
	r := newSplitReader(pr)
	bufs, sizes := [][]byte{make([]byte, Headroom+1600)}, []int{0}
	pr.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := r.read(bufs, sizes, Headroom); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	pr.SetReadDeadline(time.Time{})
	done := make(chan error, 1)
	go func() {
		_, err := r.read(bufs, sizes, Headroom)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // let it park (the result holds either way)
	pr.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("read of a closed TUN: %v, want os.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("closing the file did not end the read")
	}
}
