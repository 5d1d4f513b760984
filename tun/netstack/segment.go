package netstack

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/fips-go/fips-go/internal/packet"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// maxHeaderLen bounds the IP plus TCP header of a super-packet: a 60-byte
// IPv4 header (or a 40-byte IPv6 one) plus a 60-byte TCP header.
const maxHeaderLen = 120

// Short names for the header constants this file uses most.
const (
	ipv4HeaderLen = packet.IPv4HeaderLen
	ipv6HeaderLen = packet.IPv6HeaderLen
	tcpHeaderLen  = packet.TCPHeaderLen
	protoTCP      = packet.ProtoTCP

	tcpFlagFin = packet.TCPFin
	tcpFlagPsh = packet.TCPPsh
	tcpFlagCwr = packet.TCPCwr
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
	if packet.Version(p) == 4 {
		hl = packet.IPv4Header(p).HeaderLen()
	}
	if len(p) >= hl+tcpHeaderLen {
		hl += packet.TCPHeader(p[hl:]).HeaderLen()
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
	switch v := packet.Version(h); {
	case hl >= ipv4HeaderLen && v == 4:
		ip := packet.IPv4Header(h)
		s.v6, s.ipLen = false, ip.HeaderLen()
		if s.ipLen < ipv4HeaderLen || ip.Protocol() != protoTCP {
			return fmt.Errorf("%w: IPv4 header length %d, protocol %d", errBadSuperPacket, s.ipLen, ip.Protocol())
		}
	case hl >= ipv6HeaderLen && v == 6:
		s.v6, s.ipLen = true, ipv6HeaderLen
		if nh := packet.IPv6Header(h).NextHeader(); nh != protoTCP {
			return fmt.Errorf("%w: IPv6 next header %d", errBadSuperPacket, nh)
		}
	default:
		return fmt.Errorf("%w: %d header bytes, version %d", errBadSuperPacket, hl, v)
	}
	if s.ipLen+tcpHeaderLen > hl || s.ipLen+packet.TCPHeader(h[s.ipLen:]).HeaderLen() != hl {
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
	ip, tcp := seg[:s.ipLen], packet.TCPHeader(seg[s.ipLen:])
	var pseudo uint16
	if s.v6 {
		ip6 := packet.IPv6Header(ip)
		ip6.SetPayloadLen(len(seg) - ipv6HeaderLen)
		pseudo = checksum.Checksum(ip6.Addrs(), 0)
	} else {
		ip4 := packet.IPv4Header(ip)
		ip4.SetTotalLen(len(seg))
		ip4.SetID(ip4.ID() + uint16(index))
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], ^checksum.Checksum(ip, 0))
		pseudo = checksum.Checksum(ip4.Addrs(), 0)
	}
	// The upper-layer length fits 16 bits (checked in start), so adding it
	// and the protocol as two words is the same as the RFC 8200 pseudo
	// header's 32-bit length field.
	pseudo = checksum.Combine(pseudo, uint16(len(tcp)))
	pseudo = checksum.Combine(pseudo, protoTCP)

	tcp.SetSeq(tcp.Seq() + uint32(offset))
	if !last {
		tcp.ClearFlags(tcpFlagFin | tcpFlagPsh)
	}
	if index > 0 {
		tcp.ClearFlags(tcpFlagCwr)
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
