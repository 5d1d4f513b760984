package tun

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// ErrUnsupported is returned by Create and CreateFromFile on systems where
// fips-go has no kernel TUN support.
var ErrUnsupported = errors.New("tun: kernel TUN devices are only supported on Linux")

// MTU limits Create and CreateFromFile accept: 68 is the IPv4 minimum
// (RFC 791) and the smallest the Linux TUN driver takes; 65535 is the
// largest IP packet.
const (
	MinMTU = 68
	MaxMTU = 65535
)

// maxNameLen is IFNAMSIZ minus the terminating NUL.
const maxNameLen = 15

// Create creates (or attaches to) the kernel TUN interface name and sets its
// MTU. On Linux the device uses the virtio-net header with TSO/USO offloads
// enabled, so Read splits offloaded super-packets and Write coalesces
// (GRO); callers must leave Headroom bytes in front of every packet. The
// name may contain one "%d" for the kernel to number it; Name reports the
// result.
func Create(name string, mtu int) (Device, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := checkMTU(mtu); err != nil {
		return nil, err
	}
	return createKernel(name, mtu)
}

// CreateFromFile wraps an already open TUN file descriptor, as handed to
// the daemon child process (fd 3 with WG_TUN_FD), and sets its MTU. The
// device owns f from then on; on error f is left open for the caller. A
// descriptor that is non-blocking here must stay so (nothing may call
// f.Fd(), which can make it blocking): the data path then reads and
// writes it with raw system calls, which must not block.
func CreateFromFile(f *os.File, mtu int) (Device, error) {
	if f == nil {
		return nil, errors.New("tun: nil file")
	}
	if err := checkMTU(mtu); err != nil {
		return nil, err
	}
	return createKernelFromFile(f, mtu)
}

func checkName(name string) error {
	if name == "" || len(name) > maxNameLen || strings.ContainsAny(name, "/: \t\n") {
		return fmt.Errorf("tun: invalid interface name %q (1 to %d characters, no '/', ':' or spaces)", name, maxNameLen)
	}
	return nil
}

func checkMTU(mtu int) error {
	if mtu < MinMTU || mtu > MaxMTU {
		return fmt.Errorf("tun: MTU %d out of range [%d, %d]", mtu, MinMTU, MaxMTU)
	}
	return nil
}

// CreateDetached wraps the open TUN file descriptor fd of an interface that
// lives in a network namespace this process cannot enter (one owned by a
// child user namespace, as in `fips-go userspace -- CMD`). Nothing is asked
// of the interface by name: the MTU is the mtu given, which whoever
// configured the interface set, and Events reports EventUp once. The
// device owns fd from then on, also on error.
func CreateDetached(fd int, mtu int) (Device, error) {
	if err := checkMTU(mtu); err != nil {
		closeFD(fd)
		return nil, err
	}
	return createDetached(fd, mtu)
}
