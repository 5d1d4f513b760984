package tun

import (
	"errors"
	"os"
	"sync"
	"syscall"
)

// splitReader reads a kernel TUN with a virtio-net header one frame per
// syscall and cuts super-packets with splitRead. A super-packet with more
// segments than the caller has buffers is finished on the next call before
// anything new is read.
type splitReader struct {
	f *os.File

	mu    sync.Mutex // guards everything below; Read may be called concurrently
	buf   []byte     // one frame: the header and up to 64 KiB
	frame []byte     // the frame being split, nil when none
	next  int        // its next segment
}

func newSplitReader(f *os.File) *splitReader {
	return &splitReader{f: f, buf: make([]byte, vnetHdrLen+65535)}
}

func (r *splitReader) read(bufs [][]byte, sizes []int, offset int) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frame == nil {
		n, err := r.f.Read(r.buf)
		if errors.Is(err, syscall.EBADFD) {
			return 0, os.ErrClosed
		}
		if err != nil {
			return 0, err
		}
		r.frame, r.next = r.buf[:n], 0
	}
	n, next, err := splitRead(r.frame, bufs, sizes, offset, r.next)
	if err != nil || next == 0 {
		r.frame = nil
	} else {
		r.next = next
	}
	return n, err
}
