package tun

import (
	"fmt"
	"os"

	"github.com/fips-go/fips-go/internal/nsock"
	"golang.org/x/sys/unix"
)

// A TUN interface may be moved to another network namespace after it was
// created (`ip link set wg1 netns NS`), while the file descriptor and our
// UDP sockets stay where they were. Everything that names the interface
// (its MTU, its index, its link events) must then be asked in the
// interface's namespace, not ours. These helpers find that namespace from
// the TUN descriptor and open sockets inside it.

// nsID identifies a network namespace: the device and inode of its nsfs
// file, which is what `ip netns identify` compares too.
type nsID struct{ dev, ino uint64 }

func nsIDOf(fd int) (nsID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nsID{}, fmt.Errorf("tun: stat netns: %w", err)
	}
	return nsID{uint64(st.Dev), st.Ino}, nil
}

// ownNetns is the namespace this process was started in: sockets for it
// need no setns, which also serves unprivileged callers whose interface
// never moved.
func ownNetns() (nsID, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		return nsID{}, fmt.Errorf("tun: stat own netns: %w", err)
	}
	return nsID{uint64(st.Dev), st.Ino}, nil
}

// tunControl runs fn with the TUN's raw descriptor.
func tunControl(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// devNetns returns a new descriptor (close-on-exec, the caller closes it)
// of the network namespace the TUN's interface lives in now. It needs
// Linux 5.2 and CAP_NET_ADMIN over that namespace.
func devNetns(f *os.File) (int, error) {
	var nsfd int
	err := tunControl(f, func(fd int) error {
		var err error
		nsfd, err = nsock.DevNetns(fd)
		return err
	})
	if err != nil {
		return -1, fmt.Errorf("tun: %w", err)
	}
	return nsfd, nil
}

// devName is the interface's current name, asked of the TUN itself (the
// name wireguard-go caches can go stale: a move may rename it).
func devName(f *os.File) (string, error) {
	var name string
	err := tunControl(f, func(fd int) error {
		ifr, err := unix.NewIfreq("")
		if err != nil {
			return err
		}
		if err := unix.IoctlIfreq(fd, unix.TUNGETIFF, ifr); err != nil {
			return err
		}
		name = ifr.Name()
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("tun: TUNGETIFF: %w", err)
	}
	return name, nil
}

// UseRouteSockets makes the device ask open for every route socket it
// needs in a namespace other than its own (where the interface was
// moved), instead of joining that namespace itself, which takes
// CAP_SYS_ADMIN: a daemon that runs without it passes a function that
// asks a privileged process to open the socket in the namespace the
// interface lives in now and send it over. groups are the multicast
// groups to join (0 for a socket that only asks questions). The device
// is not exported, so callers find this method by interface assertion,
// as device.New finds SetGSOMaxSize.
func (d *kernelDevice) UseRouteSockets(open func(groups uint32) (*os.File, error)) {
	d.openRoute.Store(&open)
}

// routeSocket opens a non-blocking rtnetlink socket in the namespace nsfd
// (ours when id is own), subscribed to the multicast groups (none for a
// socket that only asks questions); see nsock.RouteSocket.
func (d *kernelDevice) routeSocket(nsfd int, id nsID, groups uint32) (*os.File, error) {
	if id == d.own {
		fd, err := nsock.RouteSocket(groups)
		if err != nil {
			return nil, fmt.Errorf("tun: %w", err)
		}
		// Non-blocking, so the runtime poller serves it and Close wakes a
		// blocked read.
		return os.NewFile(uintptr(fd), "rtnetlink"), nil
	}
	if open := d.openRoute.Load(); open != nil {
		f, err := (*open)(groups)
		if err != nil {
			return nil, fmt.Errorf("tun: route socket from the monitor: %w", err)
		}
		return f, nil
	}
	f, err := nsock.RouteSocketIn(nsfd, -1, groups)
	if err != nil {
		return nil, fmt.Errorf("tun: %w", err)
	}
	return f, nil
}

// ifreqGet runs one interface ioctl by name on sock and returns the ifreq.
func ifreqGet(sock *os.File, name string, req uint) (*unix.Ifreq, error) {
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return nil, err
	}
	rc, err := sock.SyscallConn()
	if err != nil {
		return nil, err
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) { ierr = unix.IoctlIfreq(int(fd), req, ifr) }); err != nil {
		return nil, err
	}
	if ierr != nil {
		return nil, ierr
	}
	return ifr, nil
}
