package privsep

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrMonitorGone says the monitor no longer answers.
var ErrMonitorGone = errors.New("privsep: the monitor is gone")

// Client is the worker's end of the pair.
type Client struct {
	mu sync.Mutex // one request at a time: answers come in order
	fd int
}

// NewClient takes the worker's end of the pair, inherited from the
// monitor, and owns it from then on.
func NewClient(f *os.File) (*Client, error) {
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("privsep: %w", err)
	}
	unix.CloseOnExec(fd)
	return &Client{fd: fd}, nil
}

// RouteSocket asks the monitor for a route socket in the namespace the
// interface lives in now, joined to groups (0 or RTMGRP_LINK): what tun's
// UseRouteSockets wants.
func (c *Client) RouteSocket(groups uint32) (*os.File, error) {
	r, err := requestFor(groups)
	if err != nil {
		return nil, err
	}
	fd, err := c.ask(r)
	if err != nil {
		return nil, err
	}
	if fd < 0 {
		return nil, fmt.Errorf("%w: no descriptor in the answer", ErrBadRequest)
	}
	return os.NewFile(uintptr(fd), "rtnetlink"), nil
}

// Exit tells the monitor the worker is stopping: the monitor removes the
// UAPI socket file and lets go of the TUN before it answers.
func (c *Client) Exit() error {
	fd, err := c.ask(Exit)
	if fd >= 0 {
		unix.Close(fd)
	}
	return err
}

// ask sends r and returns the descriptor the answer carried (-1 if none).
func (c *Client) ask(r Request) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := unix.Sendmsg(c.fd, r.Append(nil), nil, nil, unix.MSG_NOSIGNAL); err != nil {
		return -1, fmt.Errorf("%w: %v", ErrMonitorGone, err)
	}
	var b [answerSize + 1]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(c.fd, b[:], oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			return -1, fmt.Errorf("%w: %v", ErrMonitorGone, err)
		}
		fds := rights(oob[:oobn])
		if n != answerSize {
			closeAll(fds)
			return -1, fmt.Errorf("privsep: answer of %d bytes", n)
		}
		if errno := unix.Errno(binary.NativeEndian.Uint32(b[:n])); errno != 0 {
			closeAll(fds)
			return -1, errno
		}
		if len(fds) == 0 {
			return -1, nil
		}
		closeAll(fds[1:])
		return fds[0], nil
	}
}

// rights are the descriptors in the control messages oob.
func rights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if f, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, f...)
		}
	}
	return fds
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
