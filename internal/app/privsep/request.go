// Package privsep splits the interface daemon in two, as OpenSSH does: a
// worker that handles every packet and every UAPI request as an
// unprivileged user, and a monitor that stays root for the two things the
// worker cannot do itself. The monitor parses nothing but a four-byte
// request, answered with a descriptor or an error number:
//
//   - open a route netlink socket in the namespace the interface lives in
//     now (after `ip link set IFACE netns NS`, joining that namespace
//     takes CAP_SYS_ADMIN), and
//   - at exit, remove the UAPI socket file (its directory is root's) and
//     let go of the TUN, so that both are gone when the worker has exited.
//
// ParseRequest is the monitor's whole parser: pure, and fuzzed.
package privsep

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Request is one request from the worker to the monitor: four bytes in
// the machine's byte order, one message on a SOCK_SEQPACKET pair.
type Request uint32

const (
	// RouteSocket asks for a route socket in the interface's namespace
	// that joins no multicast group (for questions and ioctls).
	RouteSocket Request = 0
	// RouteSocketLink asks for one subscribed to link events
	// (RTMGRP_LINK).
	RouteSocketLink Request = 1
	// Exit says the worker is stopping: the monitor removes the UAPI
	// socket file if it is still the one the daemon created, closes its
	// copy of the TUN, and answers; it opens no route socket after that.
	Exit Request = 0x74697865 // "exit"
)

// RequestSize is the length of every request.
const RequestSize = 4

// ErrBadRequest is the answer to anything but the three requests.
var ErrBadRequest = errors.New("privsep: bad request")

// ParseRequest reads one request message; any other length or value is
// ErrBadRequest.
func ParseRequest(b []byte) (Request, error) {
	if len(b) != RequestSize {
		return 0, fmt.Errorf("%w: %d bytes, want %d", ErrBadRequest, len(b), RequestSize)
	}
	switch r := Request(binary.NativeEndian.Uint32(b)); r {
	case RouteSocket, RouteSocketLink, Exit:
		return r, nil
	default:
		return 0, fmt.Errorf("%w: %#x", ErrBadRequest, uint32(r))
	}
}

// Append appends r's encoding to b.
func (r Request) Append(b []byte) []byte {
	return binary.NativeEndian.AppendUint32(b, uint32(r))
}

// Groups are the netlink multicast groups a route-socket request asks
// for.
func (r Request) Groups() uint32 {
	if r == RouteSocketLink {
		return 1 // RTMGRP_LINK
	}
	return 0
}

// requestFor is the route-socket request for groups; only none and
// RTMGRP_LINK exist.
func requestFor(groups uint32) (Request, error) {
	switch groups {
	case 0:
		return RouteSocket, nil
	case 1:
		return RouteSocketLink, nil
	}
	return 0, fmt.Errorf("%w: groups %#x", ErrBadRequest, groups)
}

// An answer is four bytes too: 0, or the errno of what failed. A route
// socket comes with a 0 answer as SCM_RIGHTS.
const answerSize = 4
