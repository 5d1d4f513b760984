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

// maxHeads is the most flows per batch that get a large buffer.
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

// flowKey identifies a flow by its addresses and ports; zero when the packet
// is not TCP or UDP (nothing to coalesce).
type flowKey struct {
	addrs [32]byte
	ports uint32
	proto uint8
}

func flowOf(pkt []byte) (k flowKey, ok bool) {
	var hl int
	switch pkt[0] >> 4 {
	case 4:
		hl = int(pkt[0]&0xf) * 4
		k.proto = pkt[9]
		copy(k.addrs[:8], pkt[12:20])
	case 6:
		hl = 40
		k.proto = pkt[6]
		copy(k.addrs[:], pkt[8:40])
	default:
		return k, false
	}
	if (k.proto != 6 && k.proto != 17) || len(pkt) < hl+4 {
		return k, false
	}
	k.ports = binary.BigEndian.Uint32(pkt[hl : hl+4])
	return k, true
}

// lendHeads swaps the first packet of each flow in out into a large buffer
// and returns the buffers lent, to be given back with returnHeads after the
// write. out[i] is a packet with tun.Headroom bytes in front.
func (g *groBufs) lendHeads(out [][]byte, lent *[maxHeads][]byte) int {
	if g == nil || len(out) < 2 {
		return 0
	}
	var seen [maxHeads]flowKey
	n := 0
	for i, p := range out {
		k, ok := flowOf(p[tun.Headroom:])
		if !ok {
			continue
		}
		dup := false
		for j := 0; j < n; j++ {
			if seen[j] == k {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		big := g.get()
		if big == nil {
			break
		}
		seen[n] = k
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
