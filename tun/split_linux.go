package tun

import (
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// splitReader reads a kernel TUN with a virtio-net header one frame per
// syscall and cuts super-packets with splitRead. A super-packet with more
// segments than the caller has buffers is finished on the next call before
// anything new is read.
type splitReader struct {
	rc     syscall.RawConn
	calls  fdCalls               // raw calls where the descriptor allows them
	doRead func(fd uintptr) bool // r.readFD, bound once: a closure would allocate per read

	mu    sync.Mutex // guards everything below; Read may be called concurrently
	rn    int        // the read in progress: bytes read
	rerr  error      // and its error
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

// newSplitReader returns nil if f has no RawConn (closed); the caller then
// reads through wireguard-go's TUN, as newGROWriter's does for writes.
func newSplitReader(f *os.File) *splitReader {
	rc, calls, err := tunCalls(f)
	if err != nil {
		return nil
	}
	r := &splitReader{rc: rc, calls: calls, buf: make([]byte, vnetHdrLen+65535)}
	r.doRead = r.readFD
	return r
}

// readFrame reads one frame into r.buf.
func (r *splitReader) readFrame() (int, error) {
	r.rn, r.rerr = 0, nil
	if err := r.rc.Read(r.doRead); err != nil {
		return 0, rawConnErr(err)
	}
	if r.rn == 0 && r.rerr == nil {
		return 0, io.EOF // as os.File.Read: only a pipe in tests ends
	}
	return r.rn, r.rerr
}

// readFD is rc's callback: false means "wait until readable".
func (r *splitReader) readFD(fd uintptr) bool {
	for {
		n, e := r.calls.call(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&r.buf[0])), uintptr(len(r.buf)))
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		case 0:
			r.rn = int(n)
		default:
			r.rerr = e
		}
		return true
	}
}

func (r *splitReader) read(bufs [][]byte, sizes []int, offset int) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frame == nil {
		n, err := r.readFrame()
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
