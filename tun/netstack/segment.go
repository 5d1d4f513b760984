package netstack

import (
	"encoding/binary"
	"errors"
	"fmt"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// maxHeaderLen bounds the IP plus TCP header of a super-packet: a 60-byte
// IPv4 header (or a 40-byte IPv6 one) plus a 60-byte TCP header.
const maxHeaderLen = 120

const (
	ipv4HeaderLen = 20
	ipv6HeaderLen = 40
	tcpHeaderLen  = 20
	protoTCP      = 6

	tcpFlagFin = 0x01
	tcpFlagPsh = 0x08
	tcpFlagCwr = 0x80
)

// errBadSuperPacket is wrapped by the errors start returns; Read counts
// such packets as GSO errors and drops them.
var errBadSuperPacket = errors.New("netstack: bad TCP super-packet")

// cursor reads a packet's bytes in order straight from gVisor's view list
// (or, in tests and the fuzzer, from a flat slice), so a super-packet is
// copied once, into the caller's buffers, and never flattened first.
type cursor struct {
	view *buffer.View
	off  int // bytes of view already read
	flat []byte
}

func viewCursor(pkt *stack.PacketBuffer) cursor {
	vl, off := pkt.AsViewList()
	c := cursor{view: vl.Front()}
	c.skip(off)
	return c
}

// read copies the next len(dst) bytes into dst and returns how many there
// were.
func (c *cursor) read(dst []byte) int {
	if c.view == nil {
		n := copy(dst, c.flat)
		c.flat = c.flat[n:]
		return n
	}
	done := 0
	for done < len(dst) && c.view != nil {
		n := copy(dst[done:], c.view.AsSlice()[c.off:])
		done += n
		c.off += n
		if c.off == c.view.Size() {
			c.view, c.off = c.view.Next(), 0
		}
	}
	return done
}

func (c *cursor) skip(n int) {
	if c.view == nil {
		c.flat = c.flat[min(n, len(c.flat)):]
		return
	}
	for n > 0 && c.view != nil {
		k := min(n, c.view.Size()-c.off)
		n -= k
		c.off += k
		if c.off == c.view.Size() {
			c.view, c.off = c.view.Next(), 0
		}
	}
}

// segmenter cuts one TCP super-packet into segments of at most mss payload
// bytes, as a NIC doing TSO would: every segment gets a copy of the headers
// with its own sequence number, IP length and ID, and fresh checksums; FIN
// and PSH stay on the last segment only, CWR on the first only.
type segmenter struct {
	hdr    [maxHeaderLen]byte
	hdrLen int // IP + TCP header bytes in hdr
	ipLen  int // IP header bytes
	v6     bool
	mss    int
	total  int // payload bytes in the super-packet
	done   int // payload bytes emitted
	index  int // segments emitted
	src    cursor
	pkt    *stack.PacketBuffer // reference held while segments remain; nil for flat sources
}

// startPacket prepares to segment a super-packet the stack handed us,
// taking over the caller's reference to pkt (released when done or on
// error).
func (s *segmenter) startPacket(pkt *stack.PacketBuffer) error {
	c := viewCursor(pkt)
	hl := pkt.HeaderSize()
	if hl > maxHeaderLen || c.read(s.hdr[:hl]) != hl {
		pkt.DecRef()
		return fmt.Errorf("%w: %d header bytes", errBadSuperPacket, hl)
	}
	if err := s.start(hl, int(pkt.GSOOptions.MSS), pkt.Data().Size(), c); err != nil {
		pkt.DecRef()
		return err
	}
	s.pkt = pkt
	return nil
}

// startFlat prepares to segment a super-packet held in one slice.
func (s *segmenter) startFlat(p []byte, mss int) error {
	if len(p) < ipv4HeaderLen {
		return fmt.Errorf("%w: %d bytes", errBadSuperPacket, len(p))
	}
	hl := ipv6HeaderLen
	if p[0]>>4 == 4 {
		hl = int(p[0]&0xf) * 4
	}
	if len(p) >= hl+tcpHeaderLen {
		hl += int(p[hl+12]>>4) * 4
	}
	if hl > maxHeaderLen || hl > len(p) {
		return fmt.Errorf("%w: header of %d bytes in %d", errBadSuperPacket, hl, len(p))
	}
	copy(s.hdr[:], p[:hl])
	return s.start(hl, mss, len(p)-hl, cursor{flat: p[hl:]})
}

// start validates the header in s.hdr[:hl]: IPv4 or IPv6 (without
// extension headers) carrying TCP with a data offset that ends exactly at
// hl.
func (s *segmenter) start(hl, mss, total int, src cursor) error {
	if hl < ipv4HeaderLen {
		return fmt.Errorf("%w: %d header bytes", errBadSuperPacket, hl)
	}
	h := s.hdr[:hl]
	switch {
	case hl >= ipv4HeaderLen && h[0]>>4 == 4:
		s.v6, s.ipLen = false, int(h[0]&0xf)*4
		if s.ipLen < ipv4HeaderLen || h[9] != protoTCP {
			return fmt.Errorf("%w: IPv4 header length %d, protocol %d", errBadSuperPacket, s.ipLen, h[9])
		}
	case hl >= ipv6HeaderLen && h[0]>>4 == 6:
		s.v6, s.ipLen = true, ipv6HeaderLen
		if h[6] != protoTCP {
			return fmt.Errorf("%w: IPv6 next header %d", errBadSuperPacket, h[6])
		}
	default:
		return fmt.Errorf("%w: %d header bytes, version %d", errBadSuperPacket, hl, h[0]>>4)
	}
	if s.ipLen+tcpHeaderLen > hl || s.ipLen+int(h[s.ipLen+12]>>4)*4 != hl {
		return fmt.Errorf("%w: TCP header does not end at byte %d", errBadSuperPacket, hl)
	}
	if total > 0 && mss <= 0 {
		return fmt.Errorf("%w: MSS %d", errBadSuperPacket, mss)
	}
	if total+hl-s.ipLen > 0xffff {
		return fmt.Errorf("%w: %d payload bytes", errBadSuperPacket, total)
	}
	s.hdrLen, s.mss, s.total, s.done, s.index, s.src = hl, mss, total, 0, 0, src
	return nil
}

// active reports whether segments remain.
func (s *segmenter) active() bool {
	return s.hdrLen != 0 && (s.done < s.total || s.index == 0)
}

// nextLen is the size of the next segment.
func (s *segmenter) nextLen() int {
	return s.hdrLen + min(s.mss, s.total-s.done)
}

// next writes the next segment into dst, which must hold nextLen bytes,
// and returns its length.
func (s *segmenter) next(dst []byte) int {
	n := min(s.mss, s.total-s.done)
	size := s.hdrLen + n
	copy(dst, s.hdr[:s.hdrLen])
	got := s.src.read(dst[s.hdrLen:size])
	if got < n { // cannot happen for a packet start accepted; stay safe
		clear(dst[s.hdrLen+got : size])
	}
	last := s.done+n >= s.total
	s.fixHeaders(dst[:size], s.done, s.index, last)
	s.done += n
	s.index++
	if !s.active() {
		s.release()
	}
	return size
}

// fixHeaders turns the copied super-packet header in seg into this
// segment's: lengths, sequence number, IPv4 ID, flags and checksums.
func (s *segmenter) fixHeaders(seg []byte, offset, index int, last bool) {
	ip, tcp := seg[:s.ipLen], seg[s.ipLen:]
	var pseudo uint16
	if s.v6 {
		binary.BigEndian.PutUint16(ip[4:], uint16(len(seg)-ipv6HeaderLen))
		pseudo = checksum.Checksum(ip[8:40], 0)
	} else {
		binary.BigEndian.PutUint16(ip[2:], uint16(len(seg)))
		binary.BigEndian.PutUint16(ip[4:], binary.BigEndian.Uint16(ip[4:])+uint16(index))
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], ^checksum.Checksum(ip, 0))
		pseudo = checksum.Checksum(ip[12:20], 0)
	}
	// The upper-layer length fits 16 bits (checked in start), so adding it
	// and the protocol as two words is the same as the RFC 8200 pseudo
	// header's 32-bit length field.
	pseudo = checksum.Combine(pseudo, uint16(len(tcp)))
	pseudo = checksum.Combine(pseudo, protoTCP)

	binary.BigEndian.PutUint32(tcp[4:], binary.BigEndian.Uint32(tcp[4:])+uint32(offset))
	if !last {
		tcp[13] &^= tcpFlagFin | tcpFlagPsh
	}
	if index > 0 {
		tcp[13] &^= tcpFlagCwr
	}
	tcp[16], tcp[17] = 0, 0
	binary.BigEndian.PutUint16(tcp[16:], ^checksum.Checksum(tcp, pseudo))
}

// release drops the packet reference and resets the segmenter.
func (s *segmenter) release() {
	if s.pkt != nil {
		s.pkt.DecRef()
		s.pkt = nil
	}
	s.hdrLen, s.src = 0, cursor{}
}
