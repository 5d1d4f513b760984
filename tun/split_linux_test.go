package tun

import (
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// TestSplitReaderKeepsAFrameForLargerBuffers: when the MTU went up before
// the data path heard of it, the first read into the old, smaller buffers
// fails, and the packet it read is split again into the buffers of the
// next call instead of being lost; a second failure drops it as too big.
func TestSplitReaderKeepsAFrameForLargerBuffers(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	r := newSplitReader(pr)
	frame, _ := superFrame(t, rand.New(rand.NewPCG(21, 22)))
	small := [][]byte{make([]byte, Headroom+30)}
	big := make([][]byte, 128)
	for i := range big {
		big[i] = make([]byte, Headroom+1600)
	}
	sizes := make([]int, 128)
	read := func(bufs [][]byte) (int, error) {
		t.Helper()
		type res struct {
			n   int
			err error
		}
		done := make(chan res, 1)
		go func() {
			n, err := r.read(bufs, sizes, Headroom)
			done <- res{n, err}
		}()
		select {
		case got := <-done:
			return got.n, got.err
		case <-time.After(5 * time.Second):
			t.Fatal("the read blocked: the kept frame was not used")
			return 0, nil
		}
	}

	if _, err := pw.Write(frame); err != nil {
		t.Fatal(err)
	}
	if _, err := read(small); err == nil || errors.Is(err, io.ErrShortBuffer) {
		t.Fatalf("first read into short buffers: %v, want an error that is not a drop", err)
	}
	if n, err := read(big); err != nil || n == 0 {
		t.Fatalf("read into larger buffers: %d, %v", n, err)
	}

	if _, err := pw.Write(frame); err != nil {
		t.Fatal(err)
	}
	if _, err := read(small); err == nil || errors.Is(err, io.ErrShortBuffer) {
		t.Fatalf("first short read: %v", err)
	}
	if _, err := read(small); !errors.Is(err, io.ErrShortBuffer) {
		t.Fatalf("second short read of the same packet: %v, want io.ErrShortBuffer (dropped)", err)
	}
}
