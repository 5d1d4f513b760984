// Package sockowner finds which local user owns a TCP or UDP socket of
// this machine, given its addresses, so a service on loopback can tell one
// local user's traffic from another's.
//
// On Linux it asks the kernel's socket diagnostics (NETLINK_SOCK_DIAG) and
// falls back to /proc/net/{tcp,udp}{,6}; elsewhere every lookup fails with
// ErrUnsupported. The uids are those of the caller's user namespace.
package sockowner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ErrNotFound: no socket of this machine has the addresses, or, for UDP,
// sockets of more than one user could receive from the peer.
var ErrNotFound = errors.New("sockowner: no such socket")

// errOtherSeq is a reply to an earlier request on the same socket.
var errOtherSeq = errors.New("sockowner: netlink reply to another request")

// ErrUnsupported: this system cannot tell a socket's owner.
var ErrUnsupported = errors.New("sockowner: socket owners are not known on this system")

// Proto names the transport of a lookup.
type Proto uint8

const (
	TCP Proto = 6
	UDP Proto = 17
)

// procEntry is one line of /proc/net/{tcp,udp}{,6}.
type procEntry struct {
	local, remote netip.AddrPort
	state         uint8
	uid           uint32
}

// tcpTimeWait and tcpSynRecv are states whose entries carry no owner.
const (
	tcpSynRecv  = 0x03
	tcpTimeWait = 0x06
)

// parseProcNet parses the text of /proc/net/{tcp,udp}{,6}: a heading
// line, then one socket a line ("sl local rem st tx:rx tr:when retr uid
// ..."), addresses in hex as the kernel's words in the machine's byte
// order. Lines it cannot read are skipped; it never fails on input.
func parseProcNet(text string, order binary.ByteOrder) []procEntry {
	var out []procEntry
	for i, line := range strings.Split(text, "\n") {
		if i == 0 {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		local, ok1 := parseHexAddrPort(f[1], order)
		remote, ok2 := parseHexAddrPort(f[2], order)
		st, err1 := strconv.ParseUint(f[3], 16, 8)
		uid, err2 := strconv.ParseUint(f[7], 10, 32)
		if !ok1 || !ok2 || err1 != nil || err2 != nil {
			continue
		}
		out = append(out, procEntry{local: local, remote: remote, state: uint8(st), uid: uint32(uid)})
	}
	return out
}

// parseHexAddrPort reads "0100007F:1F90" or the 32-digit IPv6 form.
func parseHexAddrPort(s string, order binary.ByteOrder) (netip.AddrPort, bool) {
	hexAddr, hexPort, ok := strings.Cut(s, ":")
	if !ok || len(hexPort) != 4 || (len(hexAddr) != 8 && len(hexAddr) != 32) {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	var b [16]byte
	for i := 0; i < len(hexAddr)/8; i++ {
		w, err := strconv.ParseUint(hexAddr[8*i:8*i+8], 16, 32)
		if err != nil {
			return netip.AddrPort{}, false
		}
		order.PutUint32(b[4*i:], uint32(w))
	}
	var a netip.Addr
	if len(hexAddr) == 8 {
		a = netip.AddrFrom4([4]byte(b[:4]))
	} else {
		a = netip.AddrFrom16(b)
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(port)), true
}

// ownerIn picks the owner of the socket with addresses local and remote
// out of entries. For TCP the socket's addresses must be exactly those.
// For UDP it is every socket that would receive a datagram from remote at
// local: bound to local's port on local's address or on the unspecified
// one, and unconnected or connected to remote; they must all be one
// user's, or the answer is ErrNotFound.
func ownerIn(entries []procEntry, p Proto, local, remote netip.AddrPort) (uint32, error) {
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
	found := false
	var uid uint32
	for _, e := range entries {
		if !matches(e, p, local, remote) {
			continue
		}
		if found && e.uid != uid {
			return 0, fmt.Errorf("%w: sockets of uids %d and %d share %v", ErrNotFound, uid, e.uid, local)
		}
		found, uid = true, e.uid
	}
	if !found {
		return 0, ErrNotFound
	}
	return uid, nil
}

func matches(e procEntry, p Proto, local, remote netip.AddrPort) bool {
	if p == TCP {
		return e.state != tcpTimeWait && e.state != tcpSynRecv && e.local == local && e.remote == remote
	}
	if e.local.Port() != local.Port() {
		return false
	}
	if la := e.local.Addr(); la != local.Addr() && !la.IsUnspecified() {
		return false
	}
	ra := e.remote.Addr()
	return ra.IsUnspecified() && e.remote.Port() == 0 || e.remote == remote
}

// The request and reply of NETLINK_SOCK_DIAG for one socket, as the
// kernel's struct inet_diag_req_v2 and struct inet_diag_msg lay them out
// after the 16-byte netlink header:
//
//	inet_diag_req_v2 (56 bytes)       inet_diag_msg (72 bytes)
//	 0 family  1 protocol              0 family  1 state  2 timer  3 retrans
//	 2 ext     3 pad                   4 sockid (48 bytes)
//	 4 states (u32)                   52 expires  56 rqueue  60 wqueue
//	 8 sockid (48 bytes)              64 uid     68 inode
//
//	sockid: 0 sport (be16)  2 dport (be16)  4 src [16]  20 dst [16]
//	        36 ifindex  40 cookie [2]u32
const (
	nlHeaderLen     = 16
	diagReqLen      = 56
	diagMsgLen      = 72
	diagMsgUID      = 64
	sockDiagByFam   = 20 // SOCK_DIAG_BY_FAMILY
	nlmsgError      = 2
	nlmsgDone       = 3
	nlmFRequest     = 1
	nlmFDump        = 0x300 // NLM_F_ROOT | NLM_F_MATCH
	afInet, afInet6 = 2, 10
)

// appendDiagRequest appends the netlink message asking for the socket
// whose own address is self and whose peer is peer. The kernel's lookups
// differ: TCP reads the socket's own address from the id's source, UDP
// from its destination.
func appendDiagRequest(b []byte, p Proto, self, peer netip.AddrPort, seq uint32, order binary.AppendByteOrder) []byte {
	src, dst := self, peer
	if p == UDP {
		src, dst = peer, self
	}
	family := byte(afInet)
	if !self.Addr().Unmap().Is4() || !peer.Addr().Unmap().Is4() {
		family = afInet6
	}
	b = order.AppendUint32(b, nlHeaderLen+diagReqLen)
	b = order.AppendUint16(b, sockDiagByFam)
	b = order.AppendUint16(b, nlmFRequest)
	b = order.AppendUint32(b, seq)
	b = order.AppendUint32(b, 0)
	b = append(b, family, byte(p), 0, 0)
	b = order.AppendUint32(b, 0xffffffff) // every state
	b = binary.BigEndian.AppendUint16(b, src.Port())
	b = binary.BigEndian.AppendUint16(b, dst.Port())
	b = appendDiagAddr(b, src.Addr(), family)
	b = appendDiagAddr(b, dst.Addr(), family)
	b = order.AppendUint32(b, 0) // any interface
	b = order.AppendUint32(b, 0xffffffff)
	b = order.AppendUint32(b, 0xffffffff) // the cookie: INET_DIAG_NOCOOKIE
	return b
}

func appendDiagAddr(b []byte, a netip.Addr, family byte) []byte {
	var raw [16]byte
	if family == afInet {
		v4 := a.Unmap().As4()
		copy(raw[:], v4[:])
	} else {
		raw = a.As16() // an IPv4 address becomes v4-mapped
	}
	return append(b, raw[:]...)
}

// parseDiagReply reads the kernel's answer to one request: the owner's uid,
// ErrNotFound for ENOENT, or another error.
func parseDiagReply(b []byte, seq uint32, order binary.ByteOrder) (uint32, error) {
	if len(b) < nlHeaderLen {
		return 0, errors.New("sockowner: short netlink reply")
	}
	n := order.Uint32(b)
	typ := order.Uint16(b[4:])
	if int64(n) > int64(len(b)) || n < nlHeaderLen {
		return 0, errors.New("sockowner: bad netlink length")
	}
	if order.Uint32(b[8:]) != seq {
		return 0, errOtherSeq
	}
	body := b[nlHeaderLen:n]
	switch typ {
	case nlmsgError:
		if len(body) < 4 {
			return 0, errors.New("sockowner: short netlink error")
		}
		errno := -int32(order.Uint32(body))
		if errno == 2 { // ENOENT
			return 0, ErrNotFound
		}
		return 0, fmt.Errorf("sockowner: socket diagnostics: errno %d", errno)
	case sockDiagByFam:
		if len(body) < diagMsgLen {
			return 0, errors.New("sockowner: short socket diagnostics message")
		}
		return order.Uint32(body[diagMsgUID:]), nil
	}
	return 0, fmt.Errorf("sockowner: netlink message type %d", typ)
}

// A UDP lookup cannot ask the kernel for one socket: its lookup returns
// the first socket bound to the address, and sockets of several users
// may share it (SO_REUSEADDR). So it dumps every UDP socket of a family
// and lets ownerIn require one owner across all that match.

// appendDiagDump appends the netlink request for every socket of
// transport p in family (afInet or afInet6).
func appendDiagDump(b []byte, p Proto, family byte, seq uint32, order binary.AppendByteOrder) []byte {
	b = order.AppendUint32(b, nlHeaderLen+diagReqLen)
	b = order.AppendUint16(b, sockDiagByFam)
	b = order.AppendUint16(b, nlmFRequest|nlmFDump)
	b = order.AppendUint32(b, seq)
	b = order.AppendUint32(b, 0)
	b = append(b, family, byte(p), 0, 0)
	b = order.AppendUint32(b, 0xffffffff) // every state
	return append(b, make([]byte, 48)...) // any socket
}

// parseDiagDump reads one datagram of the kernel's answer to a dump: the
// sockets it lists, and whether it was the last (NLMSG_DONE). Messages of
// other requests are skipped.
func parseDiagDump(b []byte, seq uint32, order binary.ByteOrder) (out []procEntry, done bool, err error) {
	for len(b) >= nlHeaderLen {
		n := order.Uint32(b)
		if n < nlHeaderLen || int64(n) > int64(len(b)) {
			return out, false, errors.New("sockowner: bad netlink length")
		}
		typ, body := order.Uint16(b[4:]), b[nlHeaderLen:n]
		mine := order.Uint32(b[8:]) == seq
		b = b[min(len(b), int(n+3)&^3):] // messages are 4-byte aligned
		if !mine {
			continue
		}
		switch typ {
		case nlmsgDone:
			return out, true, nil
		case nlmsgError:
			if len(body) < 4 {
				return out, false, errors.New("sockowner: short netlink error")
			}
			return out, false, fmt.Errorf("sockowner: socket diagnostics: errno %d", -int32(order.Uint32(body)))
		case sockDiagByFam:
			if len(body) < diagMsgLen {
				return out, false, errors.New("sockowner: short socket diagnostics message")
			}
			out = append(out, diagEntry(body, order))
		}
	}
	return out, false, nil
}

// diagEntry reads one inet_diag_msg as the /proc line of the socket.
func diagEntry(m []byte, order binary.ByteOrder) procEntry {
	addr := func(raw []byte) netip.Addr {
		if m[0] == afInet {
			return netip.AddrFrom4([4]byte(raw[:4]))
		}
		return netip.AddrFrom16([16]byte(raw[:16])).Unmap()
	}
	return procEntry{
		local:  netip.AddrPortFrom(addr(m[8:24]), binary.BigEndian.Uint16(m[4:])),
		remote: netip.AddrPortFrom(addr(m[24:40]), binary.BigEndian.Uint16(m[6:])),
		state:  m[1],
		uid:    order.Uint32(m[diagMsgUID:]),
	}
}
