package device

import (
	"hash/maphash"

	"github.com/fips-go/fips-go/internal/packet"
)

// flowBuckets is the number of classes a peer's outbound flows are hashed
// into to tell whether a packet's flow has anything queued. A collision
// only costs a packet its right to go ahead, never the order of a flow.
const flowBuckets = 64

// flowSeed keys the flow hash per process, so that no one outside can
// aim flows at one bucket.
var flowSeed = maphash.MakeSeed()

// flowBucket classifies an inner IP packet by its 5-tuple (addresses,
// protocol and, for TCP, UDP, UDP-Lite, SCTP and DCCP, ports when the
// packet is not a later fragment; for ICMP, the echo identifier). Anything it cannot parse falls in
// bucket 0. IPv6 extension headers are not walked: such packets are
// classified by addresses and next header alone.
func flowBucket(pkt []byte) uint8 {
	var key [flowKeyMax]byte
	return bucketOf(key[:flowKey(pkt, &key)])
}

// flowKeyMax is the longest flow key: two IPv6 addresses, the protocol
// and four bytes of ports.
const flowKeyMax = 37

// flowKey writes pkt's flow key (see flowBucket) into key and returns its
// length; 0 for a packet it cannot parse.
func flowKey(pkt []byte, key *[flowKeyMax]byte) int {
	var n int
	var proto byte
	var l4 []byte
	switch {
	case len(pkt) >= packet.IPv4HeaderLen && packet.Version(pkt) == 4:
		ip := packet.IPv4Header(pkt)
		ihl := ip.HeaderLen()
		proto = ip.Protocol()
		n = copy(key[:], ip.Addrs())
		// Ports only in the first fragment (offset 0).
		if ihl >= packet.IPv4HeaderLen && len(pkt) >= ihl+4 && ip.FragOffset() == 0 {
			l4 = pkt[ihl:]
		}
	case len(pkt) >= packet.IPv6HeaderLen && packet.Version(pkt) == 6:
		ip := packet.IPv6Header(pkt)
		proto = ip.NextHeader()
		n = copy(key[:], ip.Addrs())
		if len(pkt) >= packet.IPv6HeaderLen+4 {
			l4 = pkt[packet.IPv6HeaderLen:]
		}
	default:
		return 0
	}
	key[n] = proto
	n++
	switch proto {
	case packet.ProtoTCP, packet.ProtoUDP, packet.ProtoDCCP, packet.ProtoSCTP, packet.ProtoUDPLite:
		if l4 != nil {
			n += copy(key[n:], l4[:4]) // the ports, where all five keep them
		}
	case packet.ProtoICMPv4, packet.ProtoICMPv6:
		// ICMP echo: the identifier tells one ping session from another,
		// as a port would (type and code first, then checksum, then it).
		if len(l4) >= 6 {
			n += copy(key[n:], packet.ICMPEchoID(l4))
		}
	}
	return n
}

// bucketOf hashes a flow key into its bucket; the empty key is bucket 0.
func bucketOf(key []byte) uint8 {
	if len(key) == 0 {
		return 0
	}
	return uint8(maphash.Bytes(flowSeed, key) % flowBuckets)
}

// flowMemo classifies a run of packets as flowBucket does, but hashes a
// key only when it differs from the previous packet's: the segments of one
// super-packet, most of a bulk batch, share theirs. The zero value is
// ready: it holds the empty key's bucket, 0.
type flowMemo struct {
	key, last [flowKeyMax]byte
	n         int // length of last
	h         uint8
}

func (m *flowMemo) bucket(pkt []byte) uint8 {
	n := flowKey(pkt, &m.key)
	if n == m.n && m.key == m.last {
		return m.h
	}
	m.h, m.last, m.n = bucketOf(m.key[:n]), m.key, n
	return m.h
}
