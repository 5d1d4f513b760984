package sockowner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Owner returns the uid of the socket of transport p whose own address is
// self and whose peer is peer: for TCP the connection self<->peer, for UDP
// the socket that receives a datagram peer sends to self (bound to self or
// to the unspecified address with self's port, unconnected or connected
// to peer). For UDP every such socket must be one user's: sockets of
// several users may share an address (SO_REUSEADDR), and then the answer
// is ErrNotFound.
func Owner(p Proto, self, peer netip.AddrPort) (uint32, error) {
	uid, err := diagOwner(p, self, peer)
	if err == nil {
		return uid, nil
	}
	// Without the diagnostics module, or for what it cannot see, the
	// tables in /proc say the same more slowly.
	if uid, perr := procOwner(p, self, peer); perr == nil {
		return uid, nil
	} else if errors.Is(err, ErrNotFound) || errors.Is(perr, ErrNotFound) {
		return 0, ErrNotFound
	} else {
		return 0, fmt.Errorf("%w; %w", err, perr)
	}
}

var diagSeq atomic.Uint32

func diagOwner(p Proto, self, peer netip.AddrPort) (uint32, error) {
	if p == UDP {
		return diagUDPOwner(self, peer)
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, fmt.Errorf("sockowner: netlink: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(int64(time.Second))
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	seq := diagSeq.Add(1)
	req := appendDiagRequest(nil, p, self, peer, seq, binary.NativeEndian)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("sockowner: netlink: %w", err)
	}
	buf := make([]byte, 4096)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return 0, fmt.Errorf("sockowner: netlink: %w", err)
		}
		uid, err := parseDiagReply(buf[:n], seq, binary.NativeEndian)
		if err != nil && errors.Is(err, errOtherSeq) {
			continue
		}
		return uid, err
	}
}

// diagUDPOwner dumps every UDP socket, IPv4 and IPv6 (a dual-stack
// socket on :: takes IPv4 too), and requires one owner across all that
// would receive from peer at self.
func diagUDPOwner(self, peer netip.AddrPort) (uint32, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, fmt.Errorf("sockowner: netlink: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(int64(time.Second))
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	var entries []procEntry
	buf := make([]byte, 32<<10)
	for _, family := range []byte{afInet, afInet6} {
		seq := diagSeq.Add(1)
		req := appendDiagDump(nil, UDP, family, seq, binary.NativeEndian)
		if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			return 0, fmt.Errorf("sockowner: netlink: %w", err)
		}
		for done := false; !done; {
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				return 0, fmt.Errorf("sockowner: netlink: %w", err)
			}
			var got []procEntry
			got, done, err = parseDiagDump(buf[:n], seq, binary.NativeEndian)
			if err != nil {
				return 0, err
			}
			entries = append(entries, got...)
		}
	}
	return ownerIn(entries, UDP, self, peer)
}

func procOwner(p Proto, self, peer netip.AddrPort) (uint32, error) {
	name := "udp"
	if p == TCP {
		name = "tcp"
	}
	var entries []procEntry
	for _, suffix := range []string{"", "6"} {
		b, err := os.ReadFile("/proc/net/" + name + suffix)
		if err != nil {
			if suffix == "6" && errors.Is(err, os.ErrNotExist) {
				continue // no IPv6 here
			}
			return 0, err
		}
		entries = append(entries, parseProcNet(string(b), binary.NativeEndian)...)
	}
	return ownerIn(entries, p, self, peer)
}
