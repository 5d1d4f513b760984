package conn

// UDP segmentation offload (UDP_SEGMENT) sends one message that the kernel
// cuts into equal-size datagrams; only the last may be shorter. The planner
// below decides which runs of a Send batch become one such message. It is a
// pure function so it can be tested and fuzzed without sockets.

// GSOMaxSegments and GSOMaxBytes bound one message of the Linux bind; the
// device sizes the TUN's TSO super-packets by them (device/tso.go).
const (
	// GSOMaxSegments is the kernel's UDP_MAX_SEGMENTS on every kernel that
	// has UDP_SEGMENT (newer kernels allow more; 64 is safe everywhere).
	GSOMaxSegments = 64
	// GSOMaxBytes keeps one message within the 16-bit IPv6 payload length
	// (65535 minus the UDP header) and the IPv4 total length (65535 minus
	// 20 bytes of IP and 8 of UDP) alike, with room for IPv6's larger
	// header: 65535 - 40 - 8.
	GSOMaxBytes = 1<<16 - 1 - 40 - 8
)

// gsoGroup is the run bufs[start:end] sent as one message. When it holds
// more than one datagram the kernel splits it every seg bytes.
type gsoGroup struct {
	start, end int
	seg        int
}

// planGSO appends to groups the greedy split of bufs into messages: a run
// of datagrams of one size seg, optionally ended by one shorter non-empty
// datagram, at most maxSegs datagrams and maxBytes bytes per run. Zero-size
// datagrams always travel alone (a zero segment size means "no GSO"), as
// does anything longer than maxBytes, and so does any datagram of segLimit
// bytes or more when segLimit > 0 (the kernel cannot fragment a segment, so
// one too big for the path must go as a plain datagram it may fragment).
// With maxSegs 1 it yields one group per datagram. It appends into the
// caller's slice so a preallocated one makes planning allocation-free.
func planGSO(groups []gsoGroup, bufs [][]byte, maxSegs, maxBytes, segLimit int) []gsoGroup {
	for i := 0; i < len(bufs); {
		seg := len(bufs[i])
		g := gsoGroup{start: i, end: i + 1, seg: seg}
		total := seg
		alone := seg == 0 || (segLimit > 0 && seg >= segLimit)
		for j := i + 1; !alone && j < len(bufs) && j-i < maxSegs; j++ {
			l := len(bufs[j])
			if l == 0 || l > seg || total+l > maxBytes {
				break
			}
			total += l
			g.end = j + 1
			if l < seg {
				break
			}
		}
		groups = append(groups, g)
		i = g.end
	}
	return groups
}
