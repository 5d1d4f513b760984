package tun

import (
	"fmt"
	"os"
	"runtime"

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
		nsfd, err = unix.IoctlRetInt(fd, unix.TUNGETDEVNETNS)
		return err
	})
	if err != nil {
		return -1, fmt.Errorf("tun: TUNGETDEVNETNS: %w", err)
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

// inNetns runs fn on an OS thread that has joined the namespace nsfd, then
// returns the thread to the namespace it came from and to the scheduler.
// Discarding the thread instead (exiting still locked) is not enough: the
// runtime cannot end the main thread, so a goroutine that happened to run
// there would wedge it in the namespace for good, and a thread in a
// namespace keeps it alive past `ip netns del`. Only if the switch back
// fails is the thread left locked, and so ended.
func inNetns(nsfd int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		back, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("tun: open own netns: %w", err)
			return
		}
		defer unix.Close(back)
		if err := unix.Setns(nsfd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("tun: setns: %w", err)
			return
		}
		err = fn()
		if unix.Setns(back, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// routeSocket opens a non-blocking rtnetlink socket in the namespace nsfd
// (ours when id is own), subscribed to the multicast groups (none for a
// socket that only asks questions). The same socket also answers interface
// ioctls (SIOCGIFMTU and friends) for that namespace: netlink sockets pass
// unknown ioctls on to the device layer of their namespace.
func routeSocket(nsfd int, id, own nsID, groups uint32) (*os.File, error) {
	var fd int
	open := func() error {
		var err error
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
		if err != nil {
			return fmt.Errorf("tun: netlink socket: %w", err)
		}
		if groups == 0 {
			return nil
		}
		if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: groups}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("tun: netlink bind: %w", err)
		}
		return nil
	}
	var err error
	if id == own {
		err = open()
	} else {
		err = inNetns(nsfd, open)
	}
	if err != nil {
		return nil, err
	}
	// Non-blocking, so the runtime poller serves it and Close wakes a
	// blocked read.
	return os.NewFile(uintptr(fd), "rtnetlink"), nil
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
