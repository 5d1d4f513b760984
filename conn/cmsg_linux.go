package conn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// Control messages (msg_control) as Linux lays them out, one after another,
// each starting at a multiple of sizeof(size_t):
//
//	+-----------------+-----------+-----------+----------------+---------+
//	| cmsg_len size_t | level i32 | type  i32 | data           | padding |
//	+-----------------+-----------+-----------+----------------+---------+
//	 <---------------- cmsg_len counts header and data ------->
//
// The ones this package reads or writes:
//
//	SOL_UDP     UDP_GRO       int32      segment size of a coalesced read
//	SOL_UDP     UDP_SEGMENT   uint16     segment size for a GSO send
//	IPPROTO_IP  IP_PKTINFO    in_pktinfo  {ifindex i32, spec_dst [4], addr [4]}
//	IPPROTO_IPV6 IPV6_PKTINFO in6_pktinfo {addr [16], ifindex u32}
//	SOL_SOCKET  SO_TIMESTAMPNS_NEW  {sec i64, nsec i64}  kernel receive time
//	SOL_SOCKET  SO_TIMESTAMPNS_OLD  timespec (native long fields), same
//
// All integers are in host byte order.

const (
	cmsgAlignTo = unix.SizeofPtr
	cmsgHdrLen  = unix.SizeofCmsghdr
)

// Constant forms of cmsgSpace for sizing buffers.
const (
	cmsgHdrSpace  = (cmsgHdrLen + cmsgAlignTo - 1) &^ (cmsgAlignTo - 1)
	segSpace      = cmsgHdrSpace + (4+cmsgAlignTo-1)&^(cmsgAlignTo-1)
	pktinfo6Space = cmsgHdrSpace + (unix.SizeofInet6Pktinfo+cmsgAlignTo-1)&^(cmsgAlignTo-1)

	// rxCtrlSpace is the control buffer per received message. GRO, one
	// PKTINFO and a timestamp need 96 bytes on 64-bit; the rest is slack so
	// that an option other code enables on the socket truncates nothing we
	// need.
	rxCtrlSpace = 2 * (segSpace + pktinfo6Space)
	// txCtrlSpace fits the largest control a send writes: PKTINFO plus
	// UDP_SEGMENT.
	txCtrlSpace = pktinfo6Space + segSpace
)

func cmsgAlign(n int) int    { return (n + cmsgAlignTo - 1) &^ (cmsgAlignTo - 1) }
func cmsgLen(data int) int   { return cmsgAlign(cmsgHdrLen) + data }
func cmsgSpace(data int) int { return cmsgAlign(cmsgHdrLen) + cmsgAlign(data) }

// control is what one message carries in msg_control.
type control struct {
	// segSize is the GRO segment size on receive or the GSO segment size
	// on send; 0 means the message is a single datagram.
	segSize int
	// src is the local address: the packet's destination on receive
	// (IP_PKTINFO ipi_spec_dst, IPV6_PKTINFO ipi6_addr) and the source to
	// use on send. The zero Addr means none.
	src netip.Addr
	// ifIndex is the interface of src (0 when unknown or not wanted).
	ifIndex int32
	// rxTime is when the kernel received the datagram, in Unix nanoseconds
	// (SO_TIMESTAMPNS); 0 when the socket does not report it.
	rxTime int64
}

// errBadControl reports a control buffer that does not parse.
var errBadControl = errors.New("conn: malformed control message")

// parseControl reads the UDP_GRO/UDP_SEGMENT and PKTINFO messages in b and
// ignores any other. It never panics on arbitrary input.
func parseControl(b []byte) (control, error) {
	var c control
	for len(b) > 0 {
		if len(b) < cmsgHdrLen {
			return control{}, fmt.Errorf("%w: %d trailing bytes", errBadControl, len(b))
		}
		var l uint64
		if cmsgAlignTo == 8 {
			l = binary.NativeEndian.Uint64(b)
		} else {
			l = uint64(binary.NativeEndian.Uint32(b))
		}
		if l < uint64(cmsgHdrLen) || l > uint64(len(b)) {
			return control{}, fmt.Errorf("%w: length %d of %d", errBadControl, l, len(b))
		}
		level := int32(binary.NativeEndian.Uint32(b[cmsgAlignTo:]))
		typ := int32(binary.NativeEndian.Uint32(b[cmsgAlignTo+4:]))
		if err := c.parseOne(level, typ, b[cmsgAlign(cmsgHdrLen):l]); err != nil {
			return control{}, err
		}
		b = b[min(cmsgAlign(int(l)), len(b)):]
	}
	return c, nil
}

// parseOne decodes the data of one control message into c.
func (c *control) parseOne(level, typ int32, data []byte) error {
	short := func() error {
		return fmt.Errorf("%w: %d data bytes for level %d type %d", errBadControl, len(data), level, typ)
	}
	switch {
	case level == unix.SOL_UDP && (typ == unix.UDP_GRO || typ == unix.UDP_SEGMENT):
		// The kernel reports UDP_GRO as an int and takes UDP_SEGMENT as a
		// u16; accept either width for either so a round trip holds.
		switch {
		case len(data) >= 4:
			v := int32(binary.NativeEndian.Uint32(data))
			if v < 0 || v > 1<<16-1 {
				return fmt.Errorf("%w: segment size %d", errBadControl, v)
			}
			c.segSize = int(v)
		case len(data) >= 2:
			c.segSize = int(binary.NativeEndian.Uint16(data))
		default:
			return short()
		}
	case level == unix.IPPROTO_IP && typ == unix.IP_PKTINFO:
		if len(data) < unix.SizeofInet4Pktinfo {
			return short()
		}
		c.ifIndex = int32(binary.NativeEndian.Uint32(data))
		c.src = netip.AddrFrom4([4]byte(data[4:8]))
	case level == unix.SOL_SOCKET && (typ == unix.SO_TIMESTAMPNS_NEW || typ == unix.SO_TIMESTAMPNS_OLD):
		// The new form is two int64s everywhere; the old one is a native
		// timespec, whose fields are 32 bits wide on 32-bit systems.
		switch {
		case typ == unix.SO_TIMESTAMPNS_OLD && unix.SizeofPtr == 4 && len(data) >= 8:
			sec, nsec := int32(binary.NativeEndian.Uint32(data)), int32(binary.NativeEndian.Uint32(data[4:]))
			c.rxTime = int64(sec)*1e9 + int64(nsec)
		case len(data) >= 16:
			sec, nsec := int64(binary.NativeEndian.Uint64(data)), int64(binary.NativeEndian.Uint64(data[8:]))
			c.rxTime = sec*1e9 + nsec
		default:
			return short()
		}
	case level == unix.IPPROTO_IPV6 && typ == unix.IPV6_PKTINFO:
		if len(data) < unix.SizeofInet6Pktinfo {
			return short()
		}
		c.src = netip.AddrFrom16([16]byte(data[:16]))
		c.ifIndex = int32(binary.NativeEndian.Uint32(data[16:]))
	}
	return nil
}

// writeControl writes c for a send into b: a PKTINFO when c.src is valid
// (family chosen by the address) and a UDP_SEGMENT when c.segSize > 0. It
// returns the bytes used, with every byte up to that written (padding
// zeroed) so nothing stale from an earlier send leaks into this one.
func writeControl(b []byte, c control) (int, error) {
	need := 0
	// No Unmap here: a mapped address stays IPv6 so that parse(write(c))
	// is c. The send path unmaps before it gets here.
	src := c.src
	if src.IsValid() {
		if src.Is4() {
			need += cmsgSpace(unix.SizeofInet4Pktinfo)
		} else {
			need += cmsgSpace(unix.SizeofInet6Pktinfo)
		}
	}
	if c.segSize < 0 || c.segSize > 1<<16-1 {
		return 0, fmt.Errorf("conn: segment size %d out of range", c.segSize)
	}
	if c.segSize > 0 {
		need += cmsgSpace(2)
	}
	if need > len(b) {
		return 0, fmt.Errorf("conn: control buffer of %d bytes, need %d", len(b), need)
	}
	clear(b[:need])
	n := 0
	if src.IsValid() {
		if src.Is4() {
			d := putCmsgHeader(b[n:], unix.IPPROTO_IP, unix.IP_PKTINFO, unix.SizeofInet4Pktinfo)
			binary.NativeEndian.PutUint32(d, uint32(c.ifIndex))
			a := src.As4()
			copy(d[4:8], a[:]) // ipi_spec_dst: the source to use
			n += cmsgSpace(unix.SizeofInet4Pktinfo)
		} else {
			d := putCmsgHeader(b[n:], unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, unix.SizeofInet6Pktinfo)
			a := src.As16()
			copy(d[:16], a[:])
			binary.NativeEndian.PutUint32(d[16:], uint32(c.ifIndex))
			n += cmsgSpace(unix.SizeofInet6Pktinfo)
		}
	}
	if c.segSize > 0 {
		d := putCmsgHeader(b[n:], unix.SOL_UDP, unix.UDP_SEGMENT, 2)
		binary.NativeEndian.PutUint16(d, uint16(c.segSize))
		n += cmsgSpace(2)
	}
	return n, nil
}

// putCmsgHeader writes a header for dataLen bytes of data at the start of b
// and returns the data area.
func putCmsgHeader(b []byte, level, typ int32, dataLen int) []byte {
	l := cmsgLen(dataLen)
	if cmsgAlignTo == 8 {
		binary.NativeEndian.PutUint64(b, uint64(l))
	} else {
		binary.NativeEndian.PutUint32(b, uint32(l))
	}
	binary.NativeEndian.PutUint32(b[cmsgAlignTo:], uint32(level))
	binary.NativeEndian.PutUint32(b[cmsgAlignTo+4:], uint32(typ))
	return b[cmsgAlign(cmsgHdrLen):l]
}

// sockaddrBuf holds a struct sockaddr_in or sockaddr_in6:
//
//	sockaddr_in:  family u16 (host order) | port u16 (big endian) | addr [4]  | zero [8]
//	sockaddr_in6: family u16 (host order) | port u16 (big endian) | flowinfo u32 |
//	              addr [16] | scope_id u32 (host order)
type sockaddrBuf [unix.SizeofSockaddrInet6]byte

// parseSockaddr decodes a peer address. The IPv6 scope is not turned into
// a zone (that would need an interface-name lookup and allocate per
// packet); replies to link-local peers get their scope from SrcIfIndex.
func parseSockaddr(b []byte) (netip.AddrPort, bool) {
	if len(b) < 4 {
		return netip.AddrPort{}, false
	}
	port := binary.BigEndian.Uint16(b[2:4])
	switch binary.NativeEndian.Uint16(b) {
	case unix.AF_INET:
		if len(b) < unix.SizeofSockaddrInet4 {
			return netip.AddrPort{}, false
		}
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port), true
	case unix.AF_INET6:
		if len(b) < unix.SizeofSockaddrInet6 {
			return netip.AddrPort{}, false
		}
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), port), true
	}
	return netip.AddrPort{}, false
}

// putSockaddr encodes ap (IPv4 as sockaddr_in, otherwise sockaddr_in6 with
// the given scope) into b and returns its length.
func putSockaddr(b *sockaddrBuf, ap netip.AddrPort, scope uint32) int {
	clear(b[:])
	a := ap.Addr()
	binary.BigEndian.PutUint16(b[2:4], ap.Port())
	if a.Is4() {
		binary.NativeEndian.PutUint16(b[:], unix.AF_INET)
		a4 := a.As4()
		copy(b[4:8], a4[:])
		return unix.SizeofSockaddrInet4
	}
	binary.NativeEndian.PutUint16(b[:], unix.AF_INET6)
	a16 := a.As16()
	copy(b[8:24], a16[:])
	binary.NativeEndian.PutUint32(b[24:28], scope)
	return unix.SizeofSockaddrInet6
}
