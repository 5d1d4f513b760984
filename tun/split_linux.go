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
	kept  bool       // frame was already kept once for larger buffers
}

// errKeptForLargerBuffers is what a read returns when the packet it read
// did not fit the caller's buffers: the MTU went up and the data path has
// not grown its buffers yet. The packet is kept and split into the next
// call's buffers (once: if those are no larger it is dropped with
// io.ErrShortBuffer), so an MTU raise costs no packet.
var errKeptForLargerBuffers = errors.New("tun: packet larger than the read buffers, kept for the next read")

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
	switch {
	case errors.Is(err, errSplitShort) && !r.kept:
		r.kept = true
		return 0, errKeptForLargerBuffers
	case err != nil || next == 0:
		r.frame, r.kept = nil, false
	default:
		r.next, r.kept = next, false
	}
	return n, err
}
