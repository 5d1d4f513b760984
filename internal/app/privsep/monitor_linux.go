package privsep

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/fips-go/fips-go/internal/nsock"
	"golang.org/x/sys/unix"
)

// Monitor is the privileged half: it answers the worker's requests on
// one end of a SOCK_SEQPACKET pair, with a copy of the TUN to find the
// interface's namespace and the UAPI socket file to remove at exit.
type Monitor struct {
	conn   int // our end of the pair, blocking
	back   int // our own network namespace, to come back to
	socket string
	links  []string    // the socket's second names (awg(8)'s directory)
	ident  fs.FileInfo // the socket file as the daemon created it

	mu  sync.Mutex // guards tun
	tun *os.File   // nil after Exit
}

// NewMonitor takes conn (its end of the pair), tun (a descriptor of the
// TUN, which it owns from then on), the UAPI socket's path and its second
// names (hard links, removed with it). It opens
// what it needs later now, before the caller sandboxes it: a descriptor
// of its own namespace, and the socket file's identity.
func NewMonitor(conn, tun *os.File, socketPath string, links ...string) (*Monitor, error) {
	ident, err := os.Lstat(socketPath)
	if err != nil {
		return nil, fmt.Errorf("privsep: %w", err)
	}
	back, err := unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("privsep: own netns: %w", err)
	}
	fd, err := unix.Dup(int(conn.Fd()))
	if err != nil {
		unix.Close(back)
		return nil, fmt.Errorf("privsep: %w", err)
	}
	unix.CloseOnExec(fd)
	return &Monitor{conn: fd, back: back, socket: socketPath, links: links, ident: ident, tun: tun}, nil
}

// Serve answers requests until the worker's end closes (it exited), then
// closes the monitor's descriptors but for the socket file, which
// RemoveSocket removes.
func (m *Monitor) Serve() {
	defer unix.Close(m.back)
	defer unix.Close(m.conn)
	defer m.closeTUN()
	// One byte more than a request, so that a longer message shows.
	buf := make([]byte, RequestSize+1)
	for {
		// No buffer for control messages: descriptors the worker might
		// send are closed by the kernel unseen.
		n, _, flags, _, err := unix.Recvmsg(m.conn, buf, nil, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			return // the worker is gone
		}
		var r Request
		if flags&unix.MSG_TRUNC != 0 {
			err = ErrBadRequest
		} else {
			r, err = ParseRequest(buf[:n])
		}
		if err != nil {
			m.answer(unix.EINVAL, -1)
			continue
		}
		if r == Exit {
			m.RemoveSocket()
			m.closeTUN()
			m.answer(0, -1)
			continue
		}
		fd, errno := m.routeSocket(r.Groups())
		m.answer(errno, fd)
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// routeSocket opens a route socket in the namespace the TUN's interface
// lives in now.
func (m *Monitor) routeSocket(groups uint32) (int, unix.Errno) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tun == nil {
		return -1, unix.EBADF
	}
	rc, err := m.tun.SyscallConn()
	if err != nil {
		return -1, unix.EBADF
	}
	nsfd := -1
	if cerr := rc.Control(func(fd uintptr) { nsfd, err = nsock.DevNetns(int(fd)) }); cerr != nil || err != nil {
		return -1, errnoOf(errors.Join(cerr, err))
	}
	defer unix.Close(nsfd)
	f, err := nsock.RouteSocketIn(nsfd, m.back, groups)
	if err != nil {
		return -1, errnoOf(err)
	}
	// The descriptor outlives f only until answer sent it; f must not
	// close it first.
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		return -1, errnoOf(err)
	}
	return fd, 0
}

func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EIO
}

// answer sends errno and, when fd >= 0, fd.
func (m *Monitor) answer(errno unix.Errno, fd int) {
	b := binary.NativeEndian.AppendUint32(make([]byte, 0, answerSize), uint32(errno))
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	// An error here means the worker is gone; the next read says so.
	_ = unix.Sendmsg(m.conn, b, oob, nil, unix.MSG_NOSIGNAL)
}

func (m *Monitor) closeTUN() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tun != nil {
		m.tun.Close()
		m.tun = nil
	}
}

// RemoveSocket removes the UAPI socket file if it is still the one the
// daemon created (not a later daemon's of the same name). Removing it is
// also how the monitor asks the worker to stop: the worker exits when
// its socket file goes, as it does for `wg-quick down`.
func (m *Monitor) RemoveSocket() {
	for _, p := range append(m.links, m.socket) { // the watched name last
		fi, err := os.Lstat(p)
		if err == nil && os.SameFile(fi, m.ident) {
			os.Remove(p)
		}
	}
}
