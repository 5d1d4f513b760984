package pmtu

import (
	"encoding/binary"
	"errors"
)

// A probe and its answer travel as the plaintext of ordinary transport
// data packets, sealed under the session's keys:
//
//	 0      1      2      3      4      5      6      7
//	| 0x00 | 'f'  | 'p'  | kind |    size     |  0   |  0   | zeros to size
//
// The first nibble, an IP version of 0, is what makes it harmless to a
// peer that does not know it: wireguard-go drops a plaintext that is not
// IPv4 or IPv6 ("Packet with invalid IP version", logged at verbose), and
// the Linux kernel's WireGuard drops it as neither IPv4 nor IPv6 and
// counts an rx frame error. Both count it as data received, so a stock
// peer answers with at most the keepalive it would send after any data.
// A probe is padded with zeros to the size it tests; the answer (kind
// ack) is one 16-byte block naming that size.
const (
	ctlLen    = 8
	kindProbe = 1
	kindAck   = 2
)

// ErrNotControl is returned by ParseControl for a plaintext that is not a
// probe or an answer.
var ErrNotControl = errors.New("pmtu: not a probe message")

// IsControl reports whether a plaintext is not an IP packet but may be one
// of ours: its version nibble is 0.
func IsControl(pt []byte) bool { return len(pt) > 0 && pt[0]>>4 == 0 }

// AppendProbe appends a probe plaintext of size bytes (at least 16).
func AppendProbe(dst []byte, size int) []byte {
	size = max(size, 16)
	start := len(dst)
	dst = append(dst, make([]byte, size)...)
	putCtl(dst[start:], kindProbe, size)
	return dst
}

// AppendAck appends the answer to a probe of size bytes.
func AppendAck(dst []byte, size int) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, 16)...)
	putCtl(dst[start:], kindAck, size)
	return dst
}

func putCtl(b []byte, kind uint8, size int) {
	b[0], b[1], b[2], b[3] = 0, 'f', 'p', kind
	binary.BigEndian.PutUint16(b[4:], uint16(min(size, 0xffff)))
}

// ParseControl reads a probe (probe true) or an answer from a plaintext,
// returning the size it names; a probe's is checked against its own
// length, so a probe cut short on the way is never confirmed.
func ParseControl(pt []byte) (size int, probe bool, err error) {
	if len(pt) < ctlLen || pt[0] != 0 || pt[1] != 'f' || pt[2] != 'p' {
		return 0, false, ErrNotControl
	}
	size = int(binary.BigEndian.Uint16(pt[4:]))
	switch pt[3] {
	case kindProbe:
		if size != len(pt) {
			return 0, false, ErrNotControl
		}
		return size, true, nil
	case kindAck:
		return size, false, nil
	}
	return 0, false, ErrNotControl
}
