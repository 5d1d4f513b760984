// Package nsock opens route netlink sockets in a network namespace other
// than the caller's: the namespace a TUN's interface was moved to. It is
// the one sequence (join the namespace on a locked thread, open, come
// back) that package tun uses when it may enter namespaces itself and
// that the interface daemon's privileged monitor uses on its worker's
// behalf when the worker may not.
package nsock

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// DevNetns returns a new descriptor (close-on-exec, the caller closes it)
// of the network namespace the interface of the TUN descriptor tunfd
// lives in now. It needs Linux 5.2 and CAP_NET_ADMIN over that namespace.
func DevNetns(tunfd int) (int, error) {
	nsfd, err := unix.IoctlRetInt(tunfd, unix.TUNGETDEVNETNS)
	if err != nil {
		return -1, fmt.Errorf("TUNGETDEVNETNS: %w", err)
	}
	return nsfd, nil
}

// RouteSocket opens a non-blocking, close-on-exec rtnetlink socket in the
// calling thread's namespace, subscribed to the multicast groups (none
// for a socket that only asks questions). The same socket also answers
// interface ioctls (SIOCGIFMTU and friends) for that namespace: netlink
// sockets pass unknown ioctls on to the device layer of their namespace.
// Netlink checks the capabilities of whoever opened the socket as well
// as of whoever sends on it, so a socket opened here may be handed to a
// process that could not have joined the namespace itself.
func RouteSocket(groups uint32) (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return -1, fmt.Errorf("netlink socket: %w", err)
	}
	if groups == 0 {
		return fd, nil
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: groups}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("netlink bind: %w", err)
	}
	return fd, nil
}

// In runs fn on an OS thread that has joined the namespace nsfd, then
// returns the thread to the namespace back (a descriptor of the caller's
// own namespace; -1 opens /proc/thread-self/ns/net for the call) and to
// the scheduler. Discarding the thread instead (exiting still locked) is
// not enough: the runtime cannot end the main thread, so a goroutine that
// happened to run there would wedge it in the namespace for good, and a
// thread in a namespace keeps it alive past `ip netns del`. Only if the
// switch back fails is the thread left locked, and so ended.
func In(nsfd, back int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if back < 0 {
			b, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				runtime.UnlockOSThread()
				errc <- fmt.Errorf("open own netns: %w", err)
				return
			}
			defer unix.Close(b)
			back = b
		}
		if err := unix.Setns(nsfd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		err := fn()
		if unix.Setns(back, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// RouteSocketIn is RouteSocket in the namespace nsfd (see In for back).
func RouteSocketIn(nsfd, back int, groups uint32) (*os.File, error) {
	fd := -1
	err := In(nsfd, back, func() error {
		var err error
		fd, err = RouteSocket(groups)
		return err
	})
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "rtnetlink"), nil
}
