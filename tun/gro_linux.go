package tun

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// groWriter writes batches to a kernel TUN with IFF_VNET_HDR: each planned
// write (a single packet, or a super-packet of one flow) is one writev of
// the virtio-net header and head packet, which sit together in the head's
// buffer, plus the later segments' payloads where they lie.
type groWriter struct {
	rc    syscall.RawConn
	calls fdCalls // raw calls where the descriptor allows them

	mu   sync.Mutex // guards everything below; Write may be called concurrently
	plan groPlan
	pkts [][]byte
	iovs []unix.Iovec
	// noGSO turns coalescing off after the kernel refused a super-packet,
	// so one surprise costs one write, not every batch.
	noGSO bool

	writes, packets atomic.Uint64 // syscalls made and packets they carried

	// The write in progress, for the method value doWrite, which RawConn
	// calls (a closure would be allocated on every write).
	cur     []unix.Iovec
	curErr  error
	doWrite func(fd uintptr) bool
}

// offloads reports whether f is a TUN with a virtio-net header (vnet), and
// whether it takes UDP super-packets (USO, Linux 6.2+).
func offloads(f *os.File) (vnet, udp bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return false, false
	}
	_ = rc.Control(func(fd uintptr) {
		ifr, err := unix.NewIfreq("")
		if err != nil || unix.IoctlIfreq(int(fd), unix.TUNGETIFF, ifr) != nil {
			return
		}
		vnet = ifr.Uint16()&unix.IFF_VNET_HDR != 0
		if !vnet {
			return
		}
		// The TUN package set these offloads already (USO only where the
		// kernel has it); setting the same again is how we learn which,
		// as there is no ioctl to read them.
		const tcp = unix.TUN_F_CSUM | unix.TUN_F_TSO4 | unix.TUN_F_TSO6
		udp = unix.IoctlSetInt(int(fd), unix.TUNSETOFFLOAD, tcp|unix.TUN_F_USO4|unix.TUN_F_USO6) == nil
		if !udp {
			_ = unix.IoctlSetInt(int(fd), unix.TUNSETOFFLOAD, tcp)
		}
	})
	return vnet, udp
}

func newGROWriter(f *os.File, udp bool) *groWriter {
	rc, calls, err := tunCalls(f)
	if err != nil {
		return nil
	}
	w := &groWriter{rc: rc, calls: calls}
	w.plan.udp = udp
	w.doWrite = w.writeFD
	return w
}

// write writes bufs[i][offset:], using the offset bytes in front of each
// packet for its virtio-net header. It returns the first error (the other
// writes are still tried), or nil.
func (w *groWriter) write(bufs [][]byte, offset int) error {
	if offset < vnetHdrLen {
		return fmt.Errorf("tun: write offset %d leaves no room for the %d-byte virtio-net header", offset, vnetHdrLen)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pkts = w.pkts[:0]
	for _, b := range bufs {
		w.pkts = append(w.pkts, b[offset:])
	}
	if w.noGSO {
		w.plan.nothing(len(w.pkts))
	} else {
		w.plan.plan(w.pkts)
	}
	w.packets.Add(uint64(len(w.pkts)))
	var first error
	for i, pkt := range w.pkts {
		if !w.plan.head[i] {
			continue
		}
		w.writes.Add(1)
		err := w.writeRun(bufs[i][offset-vnetHdrLen:], pkt, i)
		if errors.Is(err, syscall.EBADFD) {
			return os.ErrClosed
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// writeRun writes the run that starts with packet i; frame is its buffer
// from the virtio-net header's place on.
func (w *groWriter) writeRun(frame, pkt []byte, i int) error {
	h := w.plan.prepare(w.pkts, i)
	h.put(frame)
	iovs := appendIovec(w.iovs[:0], frame[:vnetHdrLen+len(pkt)])
	hdrLen := w.plan.pkts[i].hdrLen
	for j := w.plan.next[i]; j >= 0; j = w.plan.next[j] {
		iovs = appendIovec(iovs, w.pkts[j][hdrLen:])
	}
	err := w.writev(iovs)
	if h.gsoType != vnetGSONone && errors.Is(err, syscall.EINVAL) {
		w.noGSO = true
		err = fmt.Errorf("tun: the kernel refused a super-packet, coalescing is off from now on: %w", err)
	}
	return err
}

func appendIovec(iovs []unix.Iovec, b []byte) []unix.Iovec {
	iovs = append(iovs, unix.Iovec{Base: unsafe.SliceData(b)})
	iovs[len(iovs)-1].SetLen(len(b))
	return iovs
}

func (w *groWriter) writev(iovs []unix.Iovec) error {
	w.iovs = iovs[:0] // keep the grown array
	w.cur, w.curErr = iovs, nil
	if err := w.rc.Write(w.doWrite); err != nil {
		return err
	}
	return w.curErr
}

// writeFD is RawConn's callback: false means "wait until writable".
func (w *groWriter) writeFD(fd uintptr) bool {
	iov, n := uintptr(unsafe.Pointer(&w.cur[0])), uintptr(len(w.cur))
	_, e := w.calls.call(unix.SYS_WRITEV, fd, iov, n)
	for e == unix.EINTR {
		_, e = w.calls.call(unix.SYS_WRITEV, fd, iov, n)
	}
	if e == unix.EAGAIN {
		return false
	}
	if e != 0 {
		w.curErr = e
	}
	return true
}
