package tun

import (
	"encoding/binary"

	"github.com/fips-go/fips-go/internal/packet"
)

// This file plans how a batch of packets is written to a kernel TUN that has
// IFF_VNET_HDR and the TSO/USO offloads on: consecutive TCP segments (and,
// where the kernel takes them, UDP datagrams) of one flow become one
// super-packet with a virtio-net header that tells the kernel how to treat
// it as the segments it was. The kernel's TCP stack then sees one large
// packet instead of dozens, which is most of what makes receiving fast.
//
// Unlike the coalescing in golang.zx2c4.com/wireguard/tun, nothing is copied
// and no checksum is read: the super-packet is the head packet plus the
// later packets' payloads as separate slices for one writev, and the packets
// just passed the AEAD of their session, so their bytes are the sender's
// (kernel WireGuard marks them CHECKSUM_UNNECESSARY for the same reason).
// Single packets go out with the data-valid flag, coalesced ones with the
// pseudo-header sum in place, as the checksum offload of a NIC expects.

// The virtio-net header (struct virtio_net_hdr, without num_buffers) in
// front of every packet read from or written to such a TUN. Its 16-bit
// fields are in the host's byte order (a legacy virtio header; we never set
// TUNSETVNETLE or TUNSETVNETBE).
//
//	0      1         2        4        6          8           10
//	+------+---------+--------+--------+----------+-----------+
//	|flags |gso_type |hdr_len |gso_size|csum_start|csum_offset|
//	+------+---------+--------+--------+----------+-----------+
const vnetHdrLen = 10

const (
	vnetFlagNeedsCsum = 1 // VIRTIO_NET_HDR_F_NEEDS_CSUM
	vnetFlagDataValid = 2 // VIRTIO_NET_HDR_F_DATA_VALID

	vnetGSONone  = 0 // VIRTIO_NET_HDR_GSO_NONE
	vnetGSOTCPv4 = 1 // VIRTIO_NET_HDR_GSO_TCPV4
	vnetGSOTCPv6 = 4 // VIRTIO_NET_HDR_GSO_TCPV6
	vnetGSOUDPL4 = 5 // VIRTIO_NET_HDR_GSO_UDP_L4
)

type vnetHdr struct {
	flags      uint8
	gsoType    uint8
	hdrLen     uint16
	gsoSize    uint16
	csumStart  uint16
	csumOffset uint16
}

func (h vnetHdr) put(b []byte) {
	_ = b[vnetHdrLen-1]
	b[0], b[1] = h.flags, h.gsoType
	binary.NativeEndian.PutUint16(b[2:], h.hdrLen)
	binary.NativeEndian.PutUint16(b[4:], h.gsoSize)
	binary.NativeEndian.PutUint16(b[6:], h.csumStart)
	binary.NativeEndian.PutUint16(b[8:], h.csumOffset)
}

// Limits of one super-packet. The IP length fields cap it at 64 KiB; the
// segment cap keeps a writev's iovec array small and is what Linux GRO
// merges at most per packet by default too.
const (
	groMaxBytes = 65535
	groMaxSegs  = 64
	// groMaxFlows is how many flows a batch keeps a super-packet open for;
	// a batch with more flows writes the excess as they come, still in order.
	groMaxFlows = 16
)

// Short names for the header constants this package uses most.
const (
	protoTCP = packet.ProtoTCP
	protoUDP = packet.ProtoUDP

	tcpFlagFIN = packet.TCPFin
	tcpFlagSYN = packet.TCPSyn
	tcpFlagRST = packet.TCPRst
	tcpFlagPSH = packet.TCPPsh
	tcpFlagACK = packet.TCPAck
	tcpFlagCWR = packet.TCPCwr
)

// groKey is what makes two packets one flow for coalescing.
type groKey struct {
	addrs [32]byte
	ports uint32
	proto uint8
	v6    bool
}

// groPkt is what the planner learns about one packet.
type groPkt struct {
	key      groKey
	hasKey   bool // a TCP or UDP packet whose ports were read
	eligible bool // may head or join a super-packet
	ipLen    int  // IP header length
	hdrLen   int  // IP plus transport header length
	payload  int
	seq      uint32 // TCP only
	push     bool   // TCP PSH: the super-packet ends with it
}

// parseGRO reads pkt, an IP packet exactly as long as its length field says
// (the data path trims to that before writing). It never reads past pkt.
func parseGRO(pkt []byte) (g groPkt) {
	if len(pkt) < packet.IPv4HeaderLen {
		return g
	}
	switch packet.Version(pkt) {
	case 4:
		ip := packet.IPv4Header(pkt)
		ihl := ip.HeaderLen()
		// A fragment's later pieces have no ports: neither key nor merge.
		if ihl < packet.IPv4HeaderLen || len(pkt) < ihl || ip.Fragment() {
			return g
		}
		g.ipLen = ihl
		g.key.proto = ip.Protocol()
		copy(g.key.addrs[:8], ip.Addrs())
		g.eligible = ihl == packet.IPv4HeaderLen && ip.TotalLen() == len(pkt)
	case 6:
		if len(pkt) < packet.IPv6HeaderLen {
			return g
		}
		ip := packet.IPv6Header(pkt)
		g.ipLen = packet.IPv6HeaderLen
		g.key.v6 = true
		g.key.proto = ip.NextHeader() // extension headers: no key, so never merged
		copy(g.key.addrs[:], ip.Addrs())
		g.eligible = ip.PayloadLen()+packet.IPv6HeaderLen == len(pkt)
	default:
		return g
	}
	hl := g.ipLen
	switch {
	case g.key.proto == protoTCP && len(pkt) >= hl+packet.TCPHeaderLen:
		tcp := packet.TCPHeader(pkt[hl:])
		th := tcp.HeaderLen()
		if th < packet.TCPHeaderLen || len(pkt) < hl+th {
			return groPkt{}
		}
		g.hdrLen = hl + th
		g.seq = tcp.Seq()
		flags := tcp.Flags()
		g.push = flags&tcpFlagPSH != 0
		// Only plain data segments merge: the kernel's own GRO leaves
		// SYN, FIN, RST, URG, ECE and CWR alone too.
		g.eligible = g.eligible && flags&^tcpFlagPSH == tcpFlagACK
	case g.key.proto == protoUDP && len(pkt) >= hl+packet.UDPHeaderLen:
		g.hdrLen = hl + packet.UDPHeaderLen
		g.eligible = g.eligible && packet.UDPHeader(pkt[hl:]).Length() == len(pkt)-hl
	default:
		return groPkt{}
	}
	g.hasKey = true
	g.key.ports = packet.TCPHeader(pkt[hl:]).Ports() // UDP's ports lie where TCP's do
	g.payload = len(pkt) - g.hdrLen
	g.eligible = g.eligible && g.payload > 0
	return g
}

// groRun is one super-packet being built: a chain of packet indices.
type groRun struct {
	key     groKey
	head    int
	tail    int
	segs    int
	gso     int    // payload size of the head; later segments are no larger
	bytes   int    // IP length of the super-packet so far
	nextSeq uint32 // TCP: the sequence number the next segment must carry
}

// groPlan is the planner's scratch, reused from batch to batch.
type groPlan struct {
	udp   bool // the TUN takes UDP super-packets (USO, Linux 6.2+)
	pkts  []groPkt
	next  []int32 // chain of each run: the next packet's index, -1 at the end
	head  []bool  // the packet starts a write
	runs  []groRun
	open  [groMaxFlows]int // indices into runs of the runs still open
	nOpen int
}

// plan groups pkts (each an IP packet) into writes. Afterwards, for every
// i with p.head[i], the write starting at i is pkts i, next[i], ... in that
// order; writes in order of i keep every flow in order.
func (p *groPlan) plan(pkts [][]byte) {
	n := len(pkts)
	p.pkts = grow(p.pkts, n)
	p.next = grow(p.next, n)
	p.head = grow(p.head, n)
	p.runs = p.runs[:0]
	p.nOpen = 0
	for i, pkt := range pkts {
		g := parseGRO(pkt)
		p.pkts[i], p.next[i], p.head[i] = g, -1, true
		if !g.hasKey {
			continue
		}
		slot := p.find(g.key)
		if slot >= 0 {
			r := &p.runs[p.open[slot]]
			if p.fits(r, pkts, i) {
				p.join(r, i)
				if r.segs == groMaxSegs || g.push || g.payload < r.gso {
					p.close(slot)
				}
				continue
			}
			// Whatever of the flow comes next must not overtake this
			// packet, so the flow's super-packet ends here.
			p.close(slot)
		}
		if g.eligible && !g.push && (g.key.proto == protoTCP || p.udp) {
			p.start(i, g)
		}
	}
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

func (p *groPlan) find(k groKey) int {
	for s := 0; s < p.nOpen; s++ {
		if p.runs[p.open[s]].key == k {
			return s
		}
	}
	return -1
}

func (p *groPlan) close(slot int) {
	p.nOpen--
	p.open[slot] = p.open[p.nOpen]
}

func (p *groPlan) start(i int, g groPkt) {
	if p.nOpen == groMaxFlows {
		p.close(0)
	}
	p.runs = append(p.runs, groRun{
		key: g.key, head: i, tail: i, segs: 1, gso: g.payload,
		bytes: g.hdrLen + g.payload, nextSeq: g.seq + uint32(g.payload),
	})
	p.open[p.nOpen] = len(p.runs) - 1
	p.nOpen++
}

func (p *groPlan) join(r *groRun, i int) {
	g := &p.pkts[i]
	p.next[r.tail] = int32(i)
	p.head[i] = false
	r.tail = i
	r.segs++
	r.bytes += g.payload
	r.nextSeq = g.seq + uint32(g.payload)
}

// fits reports whether packet i may be appended to r: the kernel will cut
// the super-packet back into exactly the packets it was made of, so every
// header field the segments do not share in that cut must match the head's.
func (p *groPlan) fits(r *groRun, pkts [][]byte, i int) bool {
	g := &p.pkts[i]
	h := &p.pkts[r.head]
	if !g.eligible || g.payload > r.gso || r.bytes+g.payload > groMaxBytes || g.hdrLen != h.hdrLen {
		return false
	}
	a, b := pkts[r.head], pkts[i]
	if !sameIPHeader(a, b, g.key.v6) {
		return false
	}
	if g.key.proto == protoUDP {
		return true
	}
	hl := g.ipLen
	return g.seq == r.nextSeq &&
		// ack number and data offset; flags were checked by parseGRO
		string(a[hl+8:hl+13]) == string(b[hl+8:hl+13]) &&
		// window, urgent pointer and every option byte
		string(a[hl+14:hl+16]) == string(b[hl+14:hl+16]) &&
		string(a[hl+18:g.hdrLen]) == string(b[hl+18:g.hdrLen])
}

// sameIPHeader compares what the segments of one super-packet share: the
// DSCP/ECN bits (a CE mark must not spread or vanish), TTL or hop limit, DF,
// and for IPv6 the flow label. IPv4 IDs may differ, as in the kernel's GRO.
func sameIPHeader(a, b []byte, v6 bool) bool {
	if v6 {
		return string(a[:4]) == string(b[:4]) && a[7] == b[7]
	}
	return a[1] == b[1] && a[8] == b[8] && a[6]&0x40 == b[6]&0x40
}

// prepare returns the virtio-net header for the write that starts with
// packet i (p.head[i]). For a run of several packets it rewrites pkts[i]'s
// headers into the super-packet's; the write is then pkts[i] followed by
// pkts[j][p.pkts[i].hdrLen:] for each later j in the chain.
func (p *groPlan) prepare(pkts [][]byte, i int) vnetHdr {
	next := p.next[i]
	if next < 0 {
		return vnetHdr{flags: vnetFlagDataValid}
	}
	g := &p.pkts[i]
	total, push := len(pkts[i]), false
	for j := next; j >= 0; j = p.next[j] {
		total += p.pkts[j].payload
		push = p.pkts[j].push
	}
	return finishRun(pkts[i], g, total, push)
}

// finishRun rewrites the head of a run with more than one packet into the
// super-packet's header and returns the virtio-net header to write before
// it. total is the super-packet's IP length; the head's payload size is
// the segment size.
func finishRun(head []byte, g *groPkt, total int, push bool) vnetHdr {
	hl := g.ipLen
	h := vnetHdr{
		flags:     vnetFlagNeedsCsum,
		hdrLen:    uint16(g.hdrLen),
		gsoSize:   uint16(g.payload),
		csumStart: uint16(hl),
	}
	if g.key.v6 {
		binary.BigEndian.PutUint16(head[4:], uint16(total-hl))
	} else {
		binary.BigEndian.PutUint16(head[2:], uint16(total))
		head[10], head[11] = 0, 0
		binary.BigEndian.PutUint16(head[10:], ^foldLE(sumLE(head[:20], 0)))
	}
	if g.key.proto == protoTCP {
		h.csumOffset = 16
		h.gsoType = vnetGSOTCPv4
		if g.key.v6 {
			h.gsoType = vnetGSOTCPv6
		}
		if push {
			head[hl+13] |= tcpFlagPSH
		}
	} else {
		h.csumOffset = 6
		h.gsoType = vnetGSOUDPL4
		binary.BigEndian.PutUint16(head[hl+4:], uint16(total-hl))
	}
	// CHECKSUM_PARTIAL: the field holds the folded pseudo-header sum (not
	// its complement); whoever finishes the checksum adds the rest to it.
	sum := pseudoSumLE(addrSumLE(head, g.key.v6), g.key.proto, total-hl)
	binary.BigEndian.PutUint16(head[hl+int(h.csumOffset):], foldLE(sum))
	return h
}

// nothing plans every packet as a write of its own.
func (p *groPlan) nothing(n int) {
	p.pkts = grow(p.pkts, n)
	p.next = grow(p.next, n)
	p.head = grow(p.head, n)
	for i := range n {
		p.pkts[i], p.next[i], p.head[i] = groPkt{}, -1, true
	}
}
