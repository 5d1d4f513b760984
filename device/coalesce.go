package device

import (
	"encoding/binary"

	"github.com/fips-go/fips-go/tun"
)

// The kernel TUN merges TCP and UDP packets of one flow into a single
// super-packet on write (GRO), but only by appending to the buffer of the
// flow's first packet, so it needs room there. Pool buffers are MTU-sized to
// keep the memory ceiling low; instead, the first packet of each flow in a
// batch is copied into one of a few large buffers lent for the write.

// groBufSize holds the largest super-packet the TUN builds plus headroom.
const groBufSize = tun.Headroom + 65535

// maxHeads is the most large buffers one batch borrows.
const maxHeads = 8

type groBufs struct {
	free chan []byte
}

func newGROBufs(n int) *groBufs {
	if n <= 0 {
		return nil
	}
	g := &groBufs{free: make(chan []byte, n)}
	for range n {
		g.free <- nil // allocated on first use
	}
	return g
}

func (g *groBufs) get() []byte {
	select {
	case b := <-g.free:
		if b == nil {
			b = make([]byte, groBufSize)
		}
		return b
	default:
		return nil
	}
}

// flowKey identifies a flow by its addresses and ports.
type flowKey struct {
	addrs [32]byte
	ports uint32
	proto uint8
}

// flowOf parses what coalescing depends on: the flow, the payload size and
// whether the packet ends a run (TCP PSH). ok is false for anything but TCP
// and UDP, which the TUN never merges, for IPv4 fragments, and for headers
// whose lengths do not fit the packet: the bytes come from a peer, so when
// ok, 0 <= payload <= len(pkt).
func flowOf(pkt []byte) (k flowKey, payload int, push bool, ok bool) {
	if len(pkt) == 0 {
		return k, 0, false, false
	}
	var hl int
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) < 20 {
			return k, 0, false, false
		}
		hl = int(pkt[0]&0xf) * 4
		// MF set or a fragment offset: the TUN does not merge fragments,
		// and a later one has no transport header to read.
		if hl < 20 || binary.BigEndian.Uint16(pkt[6:8])&0x3fff != 0 {
			return k, 0, false, false
		}
		k.proto = pkt[9]
		copy(k.addrs[:8], pkt[12:20])
	case 6:
		if len(pkt) < 40 {
			return k, 0, false, false
		}
		hl = 40
		k.proto = pkt[6]
		copy(k.addrs[:], pkt[8:40])
	default:
		return k, 0, false, false
	}
	switch {
	case k.proto == 6 && len(pkt) >= hl+20:
		th := int(pkt[hl+12]>>4) * 4
		if th < 20 || len(pkt) < hl+th {
			return k, 0, false, false
		}
		payload = len(pkt) - hl - th
		push = pkt[hl+13]&0x08 != 0
	case k.proto == 17 && len(pkt) >= hl+8:
		payload = len(pkt) - hl - 8
	default:
		return k, 0, false, false
	}
	k.ports = binary.BigEndian.Uint32(pkt[hl : hl+4])
	return k, payload, push, true
}

// run is one flow's current super-packet as the TUN will build it.
type run struct {
	key   flowKey
	seg   int  // payload size of its first packet; later ones must match
	fill  int  // bytes in it so far
	ended bool // a shorter or PSH packet closed it
}

// lendHeads predicts where the TUN will start a new super-packet (a flow's
// first packet, or the first after a shorter or PSH packet, or when 64 KiB is
// full) and swaps that packet into a large buffer. It returns how many
// buffers it lent, to be given back with returnHeads after the write. out[i]
// is a packet with tun.Headroom bytes in front.
func (g *groBufs) lendHeads(out [][]byte, lent *[maxHeads][]byte) int {
	if g == nil || len(out) < 2 {
		return 0
	}
	var runs [maxHeads]run
	flows, n := 0, 0
	for i, p := range out {
		k, payload, push, ok := flowOf(p[tun.Headroom:])
		if !ok || payload == 0 {
			continue // pure ACKs are never merged
		}
		j := 0
		for j < flows && runs[j].key != k {
			j++
		}
		size := len(p) - tun.Headroom
		if j < flows {
			r := &runs[j]
			if !r.ended && payload <= r.seg && r.fill+size <= groBufSize-tun.Headroom {
				r.fill += size
				r.ended = payload < r.seg || push
				continue
			}
		} else if flows == maxHeads {
			continue
		} else {
			flows++
		}
		big := g.get()
		if big == nil {
			break
		}
		runs[j] = run{key: k, seg: payload, fill: size, ended: push}
		lent[n] = big
		n++
		out[i] = big[:copy(big, p)]
		if n == maxHeads {
			break
		}
	}
	return n
}

func (g *groBufs) returnHeads(lent *[maxHeads][]byte, n int) {
	for i := 0; i < n; i++ {
		g.free <- lent[i][:cap(lent[i])]
		lent[i] = nil
	}
}
