package netstack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/fips-go/fips-go/internal/packet"
	"github.com/fips-go/fips-go/tun"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/stack/gro"
)

// ErrInvalidPacket is wrapped by Write's error when some packets were not
// IPv4/IPv6 packets (or failed verifyChecksums); the others were delivered.
var ErrInvalidPacket = errors.New("netstack: invalid packet")

// Read implements tun.Device: it waits until the stack has sent something,
// then fills up to len(bufs) packets at bufs[i][offset:] without waiting
// again. TCP super-packets are cut into MTU-sized segments here; one whose
// segments do not all fit is continued by the next Read. Every buffer must
// hold offset+MTU bytes. After Close it returns tun.ErrGone.
func (n *Net) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	if err := n.checkReadBufs(bufs, sizes, offset); err != nil {
		return 0, err
	}
	if len(bufs) == 0 {
		return 0, nil
	}
	n.readMu.Lock()
	defer n.readMu.Unlock()
	count := n.fillSegments(bufs, sizes, offset, 0)
	for count < len(bufs) {
		// Wait only if nothing is ready yet; after one batch, return
		// rather than go back for more, so each wakeup is one batch.
		batch, err := n.ep.q.pop(n.batch[:0], len(bufs)-count, count == 0)
		if err != nil {
			return 0, tun.ErrGone // pop fails only once the queue is closed
		}
		for i, e := range batch {
			count = n.emit(e.pkt, bufs, sizes, offset, count)
			batch[i] = queued{}
		}
		n.batch = batch[:0]
		if count > 0 || len(batch) == 0 {
			break
		}
		// Everything popped was dropped (never expected): wait again
		// instead of returning an empty batch.
	}
	return count, nil
}

func (n *Net) checkReadBufs(bufs [][]byte, sizes []int, offset int) error {
	if len(sizes) < len(bufs) {
		return fmt.Errorf("netstack: Read with %d sizes for %d buffers", len(sizes), len(bufs))
	}
	if offset < 0 {
		return fmt.Errorf("netstack: Read with negative offset %d", offset)
	}
	for i, b := range bufs {
		if len(b)-offset < n.opts.MTU {
			return fmt.Errorf("netstack: Read buffer %d has %d bytes after offset %d, need MTU %d", i, len(b)-offset, offset, n.opts.MTU)
		}
	}
	return nil
}

// emit writes pkt (whose reference it takes over) into bufs from index
// count on and returns the new count.
func (n *Net) emit(pkt *stack.PacketBuffer, bufs [][]byte, sizes []int, offset, count int) int {
	if isGSO(pkt) {
		n.ctr.gsoPackets.Add(1)
		if err := n.seg.startPacket(pkt); err != nil {
			if n.ctr.gsoErrors.Add(1) == 1 {
				n.opts.Logf("netstack: dropping TCP super-packets the segmenter cannot cut (counted in Stats.GSOErrors): %v", err)
			}
			return count
		}
		return n.fillSegments(bufs, sizes, offset, count)
	}
	defer pkt.DecRef()
	size := pkt.Size()
	dst := bufs[count][offset:]
	if size > len(dst) {
		n.countOversize(size, len(dst))
		return count
	}
	c := viewCursor(pkt)
	sizes[count] = c.read(dst[:size])
	n.ctr.packetsOut.Add(1)
	n.ctr.bytesOut.Add(uint64(size))
	return count + 1
}

// fillSegments moves segments of the pending super-packet into bufs.
func (n *Net) fillSegments(bufs [][]byte, sizes []int, offset, count int) int {
	start, bytes := count, 0
	for count < len(bufs) && n.seg.active() {
		dst := bufs[count][offset:]
		if n.seg.nextLen() > len(dst) {
			// The stack's MSS does not fit the MTU: cannot happen with
			// our endpoint, but never write past a buffer.
			n.countOversize(n.seg.nextLen(), len(dst))
			n.seg.release()
			break
		}
		sizes[count] = n.seg.next(dst)
		bytes += sizes[count]
		count++
	}
	if k := count - start; k > 0 {
		n.ctr.gsoSegments.Add(uint64(k))
		n.ctr.packetsOut.Add(uint64(k))
		n.ctr.bytesOut.Add(uint64(bytes))
	}
	return count
}

// countOversize counts a packet that did not fit its Read buffer and logs
// the first one: the stack should never produce packets above the MTU.
func (n *Net) countOversize(size, room int) {
	if n.ctr.oversize.Add(1) == 1 {
		n.opts.Logf("netstack: dropping a %d-byte packet that does not fit the %d-byte buffer (counted in Stats.Oversize)", size, room)
	}
}

// Write implements tun.Device: it hands the packets at bufs[i][offset:] to
// the stack, coalescing consecutive TCP segments of a flow with GRO first.
// The data is copied; bufs may be reused when Write returns. Packets that
// are not IPv4/IPv6 are dropped and counted, and reported by an error
// wrapping ErrInvalidPacket after the rest were delivered. Write never
// waits for Read. With Options.ACKHold a pure TCP ACK may be held back
// and delivered by a later Write or a timer, or dropped when a newer ACK
// of its flow supersedes it. After Close it returns os.ErrClosed.
func (n *Net) Write(bufs [][]byte, offset int) (int, error) {
	if offset < 0 {
		return 0, fmt.Errorf("netstack: Write with negative offset %d", offset)
	}
	n.closeMu.RLock()
	defer n.closeMu.RUnlock()
	if n.closed {
		return 0, os.ErrClosed
	}
	d := n.ep.getDispatcher()
	if d == nil {
		return 0, os.ErrClosed
	}
	g := <-n.gros
	defer func() { n.gros <- g }()
	g.Dispatcher = d
	invalid, bytes := 0, 0
	for _, b := range bufs {
		if offset > len(b) {
			invalid++
			continue
		}
		proto, size := n.inspect(b[offset:])
		if size == 0 {
			invalid++
			continue
		}
		bytes += size
		p := b[offset : offset+size]
		if n.ack.on() && !n.ack.offer(g, p, proto) {
			continue // held
		}
		enqueue(g, p, proto)
	}
	g.Flush()
	n.ctr.packetsIn.Add(uint64(len(bufs) - invalid))
	n.ctr.bytesIn.Add(uint64(bytes))
	if invalid > 0 {
		n.ctr.invalidIn.Add(uint64(invalid))
		return len(bufs), fmt.Errorf("%w: dropped %d of %d", ErrInvalidPacket, invalid, len(bufs))
	}
	return len(bufs), nil
}

// enqueue hands one packet (copied) to the GRO engine.
func enqueue(g *gro.GRO, p []byte, proto tcpip.NetworkProtocolNumber) {
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(p)})
	pkt.NetworkProtocolNumber = proto
	pkt.RXChecksumValidated = true // see linkEndpoint.Capabilities
	g.Enqueue(pkt)
	pkt.DecRef()
}

// inspect returns p's network protocol and its length by the IP header
// (trailing bytes are not part of the packet), or size 0 if p is not a
// well-formed IPv4 or IPv6 packet.
func (n *Net) inspect(p []byte) (tcpip.NetworkProtocolNumber, int) {
	var proto tcpip.NetworkProtocolNumber
	size := 0
	switch {
	case len(p) >= header.IPv4MinimumSize && p[0]>>4 == 4:
		ihl, total := int(p[0]&0xf)*4, int(binary.BigEndian.Uint16(p[2:]))
		if ihl >= header.IPv4MinimumSize && total >= ihl && total <= len(p) {
			proto, size = header.IPv4ProtocolNumber, total
		}
	case len(p) >= header.IPv6MinimumSize && p[0]>>4 == 6:
		if total := header.IPv6MinimumSize + int(binary.BigEndian.Uint16(p[4:])); total <= len(p) {
			proto, size = header.IPv6ProtocolNumber, total
		}
	}
	if size > 0 && n.opts.verifyChecksums && packet.Verify(p[:size]) != nil {
		return 0, 0
	}
	return proto, size
}
