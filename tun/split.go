package tun

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"

	"github.com/fips-go/fips-go/internal/packet"
)

// This file is the read side of the virtio-net offloads: the kernel hands
// over up to 64 KiB of one TCP flow (or UDP, with USO) as one super-packet
// whose checksum it left for us (CHECKSUM_PARTIAL), and we cut it into
// the MTU-sized packets the tunnel carries. What every segment shares
// (the pseudo-header's addresses) is summed once, not once per segment.

// vnetGSOECN is ORed into gso_type when the super-packet's first segment
// carries CWR (SKB_GSO_TCP_ECN): only that segment may keep the flag.
const vnetGSOECN = 0x80

// Errors a split returns for a super-packet it cannot cut; the reader drops
// that packet and counts it.
var (
	errSplitMalformed = errors.New("tun: malformed offloaded packet")
	// errSplitShort: our buffers are smaller than a packet, which happens
	// when the MTU went up before the data path heard of it.
	errSplitShort = fmt.Errorf("tun: packet larger than the read buffers: %w", io.ErrShortBuffer)
)

func parseVnetHdr(b []byte) (h vnetHdr, ok bool) {
	if len(b) < vnetHdrLen {
		return h, false
	}
	return vnetHdr{
		flags: b[0], gsoType: b[1],
		hdrLen:     binary.NativeEndian.Uint16(b[2:]),
		gsoSize:    binary.NativeEndian.Uint16(b[4:]),
		csumStart:  binary.NativeEndian.Uint16(b[6:]),
		csumOffset: binary.NativeEndian.Uint16(b[8:]),
	}, true
}

// splitRead turns one frame read from the TUN (virtio-net header, then the
// packet) into packets at out[i][offset:], setting sizes[i], starting with
// segment from. It returns how many it wrote and the segment to go on with
// when out had too few buffers for the rest (0 when done). It never reads or
// writes outside the slices it is given, and calling it again on the same
// frame with from = next writes the same segments a larger out would have.
func splitRead(frame []byte, out [][]byte, sizes []int, offset, from int) (n, next int, err error) {
	h, ok := parseVnetHdr(frame)
	if !ok || len(out) == 0 || len(sizes) < len(out) {
		return 0, 0, errSplitMalformed
	}
	in := frame[vnetHdrLen:]
	if h.gsoType != vnetGSONone {
		return splitGSO(h, in, out, sizes, offset, from)
	}
	n, err = splitNone(h, in, out[0][offset:])
	sizes[0] = n
	if err != nil {
		return 0, 0, err
	}
	return 1, 0, nil
}

// splitNone copies a packet the kernel did not merge, finishing its
// checksum if the kernel left that to us.
func splitNone(h vnetHdr, in, dst []byte) (int, error) {
	if len(in) > len(dst) {
		return 0, fmt.Errorf("%w (%d-byte packet, %d-byte buffer)", errSplitShort, len(in), len(dst))
	}
	if h.flags&vnetFlagNeedsCsum != 0 && !finishChecksum(in, int(h.csumStart), int(h.csumOffset)) {
		return 0, errSplitMalformed
	}
	return copy(dst, in), nil
}

// finishChecksum completes a CHECKSUM_PARTIAL packet: the field at
// start+off holds the pseudo-header sum; the checksum covers from start on.
func finishChecksum(pkt []byte, start, off int) bool {
	at := start + off
	if start < 0 || at+2 > len(pkt) || start > at {
		return false
	}
	initial := uint64(bits.ReverseBytes16(binary.BigEndian.Uint16(pkt[at:])))
	pkt[at], pkt[at+1] = 0, 0
	c := ^foldLE(sumLE(pkt[start:], initial))
	if c == 0 && off == 6 {
		c = 0xffff // UDP: a computed zero is sent as all ones (RFC 768)
	}
	binary.BigEndian.PutUint16(pkt[at:], c)
	return true
}

// splitGSO cuts a TCP or UDP super-packet. The header length comes from the
// packet itself, not from hdr_len, which the kernel may set to a whole
// packet's length on the forwarding path.
func splitGSO(h vnetHdr, in []byte, out [][]byte, sizes []int, offset, from int) (n, next int, err error) {
	gsoType := h.gsoType &^ vnetGSOECN
	hl, gso := int(h.csumStart), int(h.gsoSize)
	if len(in) < packet.IPv4HeaderLen || gso == 0 {
		return 0, 0, errSplitMalformed
	}
	version := packet.Version(in)
	v6 := version == 6
	var proto uint8
	var hdrLen, csumAt int
	switch {
	case (gsoType == vnetGSOTCPv4 && !v6) || (gsoType == vnetGSOTCPv6 && v6):
		proto = protoTCP
		if len(in) < hl+packet.TCPHeaderLen {
			return 0, 0, errSplitMalformed
		}
		hdrLen, csumAt = hl+packet.TCPHeader(in[hl:]).HeaderLen(), hl+16
		if hdrLen < hl+packet.TCPHeaderLen {
			return 0, 0, errSplitMalformed
		}
	case gsoType == vnetGSOUDPL4:
		proto = protoUDP
		hdrLen, csumAt = hl+packet.UDPHeaderLen, hl+6
	default:
		return 0, 0, fmt.Errorf("%w: GSO type %#x for IP version %d", errSplitMalformed, h.gsoType, version)
	}
	if (v6 && hl != packet.IPv6HeaderLen) ||
		(!v6 && (version != 4 || hl < packet.IPv4HeaderLen || hl != packet.IPv4Header(in).HeaderLen())) ||
		hdrLen > len(in) {
		return 0, 0, errSplitMalformed
	}
	// What every segment shares: the addresses of the pseudo-header.
	addrSum := addrSumLE(in, v6)
	in[csumAt], in[csumAt+1] = 0, 0
	payload := in[hdrLen:]
	segs := (len(payload) + gso - 1) / gso
	if from < 0 || from >= segs {
		return 0, 0, errSplitMalformed
	}
	end := min(segs, from+len(out))
	seq := uint32(0)
	if proto == protoTCP {
		seq = packet.TCPHeader(in[hl:]).Seq()
	}
	for i := from; i < end; i++ {
		chunk := payload[i*gso : min((i+1)*gso, len(payload))]
		total := hdrLen + len(chunk)
		dst := out[i-from][offset:]
		if len(dst) < total {
			return 0, 0, fmt.Errorf("%w (%d-byte segment, %d-byte buffer)", errSplitShort, total, len(dst))
		}
		copy(dst, in[:hdrLen])
		seg := dst[:total]
		if v6 {
			packet.IPv6Header(seg).SetPayloadLen(total - packet.IPv6HeaderLen)
		} else {
			ip := packet.IPv4Header(seg)
			ip.SetTotalLen(total)
			ip.SetID(packet.IPv4Header(in).ID() + uint16(i))
			seg[10], seg[11] = 0, 0
			binary.BigEndian.PutUint16(seg[10:], ^foldLE(sumLE(seg[:hl], 0)))
		}
		if proto == protoTCP {
			tcp := packet.TCPHeader(seg[hl:])
			tcp.SetSeq(seq + uint32(i*gso))
			if i > 0 {
				tcp.ClearFlags(tcpFlagCWR)
			}
			if i < segs-1 {
				tcp.ClearFlags(tcpFlagFIN | tcpFlagPSH)
			}
		} else {
			packet.UDPHeader(seg[hl:]).SetLength(total - hl)
		}
		sum := sumLE(seg[hl:hdrLen], pseudoSumLE(addrSum, proto, total-hl))
		sum = copySumLE(seg[hdrLen:], chunk, sum)
		c := ^foldLE(sum)
		if c == 0 && proto == protoUDP {
			c = 0xffff // a computed zero is sent as all ones (RFC 768)
		}
		binary.BigEndian.PutUint16(seg[csumAt:], c)
		sizes[i-from] = total
	}
	if end < segs {
		next = end
	}
	return end - from, next, nil
}
