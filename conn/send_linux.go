package conn

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// sendScratch is what one Send needs for the syscall: a message per GSO
// group, an iovec per datagram (the kernel gathers a group's datagrams
// straight from the caller's buffers, so coalescing copies nothing), a
// control area per message and the destination address they all share.
// Scratches come from a bounded free list and are sized for BatchSize.
type sendScratch struct {
	call    *mmsgCall
	msgs    []unix.Mmsghdr
	iovs    []unix.Iovec
	ctrl    []byte // txCtrlSpace per message
	groups  []gsoGroup
	name    sockaddrBuf
	nameLen uint32
	names   []sockaddrBuf // one per message for SendEach, allocated on its first use
}

func newSendScratch(batch int) *sendScratch {
	return &sendScratch{
		call:   newMmsgCall(),
		msgs:   make([]unix.Mmsghdr, batch),
		iovs:   make([]unix.Iovec, batch),
		ctrl:   make([]byte, batch*txCtrlSpace),
		groups: make([]gsoGroup, 0, batch),
	}
}

// sendSource is the sticky source of one Send; it is cleared for the rest
// of the Send once the kernel rejects it.
type sendSource struct {
	addr    netip.Addr
	ifIndex int32
	// fixed is a connected socket's own source, which cannot be dropped:
	// the kernel refusing it means the socket is stale.
	fixed bool
}

// stickyErrno reports errnos after which a send is retried without the
// sticky source: the local address or its interface went away, or no route
// leaves from it.
func stickyErrno(e unix.Errno) bool {
	switch e {
	case unix.EINVAL, unix.EADDRNOTAVAIL, unix.ENETUNREACH, unix.ENODEV:
		return true
	}
	return false
}

// gsoErrno reports errnos with which the kernel refuses a UDP_SEGMENT send:
// EIO when the route's device cannot checksum a segmented packet, EINVAL
// for a segment size or checksum setting GSO cannot do, and the "unknown
// option" family on kernels or sockets that lack it.
func gsoErrno(e unix.Errno) bool {
	switch e {
	case unix.EIO, unix.EINVAL, unix.EOPNOTSUPP, unix.ENOPROTOOPT:
		return true
	}
	return false
}

// gsoSafeSegment is the largest segment no real path is too small for: the
// IPv6 minimum MTU less the IPv6 and UDP headers. Older kernels answer
// EINVAL both for a segment above the path MTU and for GSO they cannot do
// at all; a refused segment this small must be the latter.
const gsoSafeSegment = 1280 - 40 - 8

// oversizeErrno reports whether the kernel refused a UDP_SEGMENT send of
// seg-byte segments because they exceed the path MTU: the kernel cannot
// fragment a segment, but it can fragment the same datagram sent plainly.
// Kernels since 6.x say EMSGSIZE; older ones EINVAL.
func oversizeErrno(e unix.Errno, seg int) bool {
	return e == unix.EMSGSIZE || (e == unix.EINVAL && seg > gsoSafeSegment)
}

// Send implements Bind.
func (b *LinuxBind) Send(bufs [][]byte, ep Endpoint) error {
	st := b.state.Load()
	if st == nil {
		return ErrBindClosed
	}
	dst := netip.AddrPortFrom(ep.Dst.Addr().Unmap(), ep.Dst.Port())
	s := st.v4
	if dst.Addr().Is6() {
		s = st.v6
	}
	if !dst.Addr().IsValid() || dst.Port() == 0 {
		b.stats.sendErrors.Add(1)
		return fmt.Errorf("conn: send to invalid endpoint %v", ep.Dst)
	}
	if s == nil {
		b.stats.sendErrors.Add(1)
		return fmt.Errorf("conn: send to %v: no socket of that address family", dst)
	}
	if len(bufs) == 0 {
		return nil
	}
	if st.connected != nil {
		if cs := st.connected.lookup(dst); cs != nil && cs.carries(ep) {
			if b.sendConnected(cs, bufs) == nil {
				return nil
			}
			// Some datagrams may have left before the failure; the
			// receiver's replay window drops the duplicates.
			b.stats.connFallbacks.Add(1)
		}
	}
	src := stickySource(s, ep, dst)
	sc := b.sendPool.get()
	defer b.sendPool.put(sc)
	sc.nameLen = uint32(putSockaddr(&sc.name, dst, scopeOf(dst.Addr(), ep.SrcIfIndex)))
	for len(bufs) > 0 {
		chunk := bufs[:min(len(bufs), len(sc.msgs))]
		bufs = bufs[len(chunk):]
		if err := b.sendChunk(s, sc, chunk, &src); err != nil {
			return err
		}
	}
	return nil
}

// stickySource is the source to send from on s to dst for ep. It must be
// of the destination's family: a peer that moved from IPv6 to IPv4 keeps
// no stale IPv6 source for the new address.
func stickySource(s *udpSocket, ep Endpoint, dst netip.AddrPort) sendSource {
	src := sendSource{addr: ep.Src.Unmap()}
	if !s.pktinfo || !src.addr.IsValid() || src.addr.Is4() != dst.Addr().Is4() {
		return sendSource{}
	}
	if src.addr.Is6() && src.addr.IsLinkLocalUnicast() {
		// Only a link-local source needs its interface; for any other the
		// route decides, so a route moving to another interface does not
		// strand the peer.
		src.ifIndex = ep.SrcIfIndex
	}
	return src
}

// scopeOf is the IPv6 scope id for a link-local destination: its zone if it
// has one, else the interface its traffic last arrived on.
func scopeOf(a netip.Addr, ifIndex int32) uint32 {
	if !a.Is6() || !(a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast()) {
		return 0
	}
	if z := a.Zone(); z != "" {
		if n, err := strconv.ParseUint(z, 10, 32); err == nil {
			return uint32(n)
		}
		if ifi, err := net.InterfaceByName(z); err == nil {
			return uint32(ifi.Index)
		}
	}
	return uint32(ifIndex)
}

// sendChunk sends at most BatchSize datagrams: plan GSO groups, build one
// message per group, sendmmsg them, and on a kernel refusal fall back
// (first the sticky source, then GSO for segments of the refused size and
// up, then GSO altogether) and resend from the failed message.
func (b *LinuxBind) sendChunk(s *udpSocket, sc *sendScratch, chunk [][]byte, src *sendSource) error {
	retried := false // an EMSGSIZE was tried again (see below)
	for len(chunk) > 0 {
		gso := s.gso.Load()
		maxSegs := 1
		if gso {
			maxSegs = GSOMaxSegments
		}
		sc.groups = planGSO(sc.groups[:0], chunk, maxSegs, GSOMaxBytes, int(s.segLimit.Load()))
		nm := sc.build(chunk, *src)
		sent, err := sc.call.sendmmsg(s.rc, sc.msgs[:nm])
		sc.forget(len(chunk))
		b.stats.txMessages.Add(uint64(sent))
		if sent > 0 {
			b.stats.txPackets.Add(uint64(sc.groups[sent-1].end))
		}
		if err == nil {
			return nil
		}
		failed := sc.groups[sent]
		chunk = chunk[failed.start:]
		if sent > 0 {
			retried = false
		}
		var errno unix.Errno
		switch {
		case errors.Is(err, net.ErrClosed):
			return ErrBindClosed
		case !errors.As(err, &errno):
		case src.addr.IsValid() && !src.fixed && stickyErrno(errno):
			// Tried first: a vanished local address is far more common
			// than a GSO refusal, and both can answer EINVAL.
			*src = sendSource{}
			b.stats.stickyFallback.Add(1)
			continue
		case errno == unix.EMSGSIZE && !retried:
			// A connected socket that had DF set for a probe when the
			// router's ICMP came back holds a pending EMSGSIZE, which the
			// next send returns (and clears) whatever its size: only a
			// second refusal says the segments are too big.
			retried = true
			continue
		case gso && failed.end-failed.start > 1 && oversizeErrno(errno, failed.seg):
			// Not a GSO failure: smaller segments still coalesce. The
			// next plan sends this size and up as plain datagrams.
			s.lowerSegLimit(failed.seg)
			b.stats.gsoOversize.Add(1)
			continue
		case gso && failed.end-failed.start > 1 && gsoErrno(errno):
			if s.gso.CompareAndSwap(true, false) {
				b.opts.Logf("conn: kernel refused UDP_SEGMENT (%v); sending without GSO on this socket", errno)
			}
			b.stats.gsoFallbacks.Add(1)
			continue
		}
		if sc.nameLen > 0 {
			// A connected socket's failure is its caller's to count: Send
			// retries it on the shared socket (bind_conn_fallbacks).
			b.stats.sendErrors.Add(1)
		}
		return fmt.Errorf("conn: send %d datagrams to %v: %w", len(chunk), sc.dst(), os.NewSyscallError("sendmmsg", err))
	}
	return nil
}

// build fills one message per planned group and returns the count.
func (sc *sendScratch) build(chunk [][]byte, src sendSource) int {
	iov := 0
	for gi, g := range sc.groups {
		for _, buf := range chunk[g.start:g.end] {
			setIov(&sc.iovs[iov], buf)
			iov++
		}
		c := control{src: src.addr, ifIndex: src.ifIndex}
		if g.end-g.start > 1 {
			c.segSize = g.seg
		}
		var name *byte
		if sc.nameLen > 0 { // 0: a connected socket, which has its address
			name = &sc.name[0]
		}
		sc.setMsg(gi, iov-(g.end-g.start), g.end-g.start, name, sc.nameLen, c)
	}
	return len(sc.groups)
}

// setIov points v at buf.
func setIov(v *unix.Iovec, buf []byte) {
	v.Base = nil
	if len(buf) > 0 {
		v.Base = &buf[0]
	}
	v.SetLen(len(buf))
}

// setMsg fills message i with niov iovecs from sc.iovs[iov], the
// destination (nil for a connected socket) and control c in the message's
// own control area, which is sized for the largest control, so writing it
// cannot fail.
func (sc *sendScratch) setMsg(i, iov, niov int, name *byte, nameLen uint32, c control) {
	m := &sc.msgs[i]
	m.Len = 0
	m.Hdr = unix.Msghdr{Iov: &sc.iovs[iov]}
	m.Hdr.SetIovlen(niov)
	if name != nil {
		m.Hdr.Name, m.Hdr.Namelen = name, nameLen
	}
	ctl := sc.ctrl[i*txCtrlSpace : (i+1)*txCtrlSpace]
	if n, _ := writeControl(ctl, c); n > 0 {
		m.Hdr.Control = &ctl[0]
		m.Hdr.SetControllen(n)
	}
}

// forget drops the references the iovecs hold to the caller's buffers,
// which the caller may reuse once Send returns.
func (sc *sendScratch) forget(n int) {
	for i := range n {
		sc.iovs[i].Base = nil
	}
}

// nameAt decodes SendEach's destination of message i for an error message.
func (sc *sendScratch) nameAt(i int) netip.AddrPort {
	ap, _ := parseSockaddr(sc.names[i][:sc.msgs[i].Hdr.Namelen])
	return ap
}

// dst decodes the destination for an error message.
func (sc *sendScratch) dst() netip.AddrPort {
	ap, _ := parseSockaddr(sc.name[:sc.nameLen])
	return ap
}

// SendEach sends bufs[i] to eps[i] with as few sendmmsg calls as the
// address families and the batch size allow. It is for small replies to
// many sources (cookie replies under a flood): each datagram alone, on the
// shared socket of its family, from its endpoint's sticky source (or, if
// the host no longer has that address, from the kernel's choice). A
// datagram the kernel refuses is counted in sendErrors, the first such
// error returned, and the ones after it still sent. It returns how many
// went out.
func (b *LinuxBind) SendEach(bufs [][]byte, eps []Endpoint) (int, error) {
	st := b.state.Load()
	if st == nil {
		return 0, ErrBindClosed
	}
	sc := b.sendPool.get()
	defer b.sendPool.put(sc)
	if sc.names == nil {
		sc.names = make([]sockaddrBuf, len(sc.msgs))
	}
	var first error
	total := 0
	fail := func(err error) {
		b.stats.sendErrors.Add(1)
		if first == nil {
			first = err
		}
	}
	n := min(len(bufs), len(eps))
	for _, v6 := range [2]bool{false, true} {
		s := st.v4
		if v6 {
			s = st.v6
		}
		m := 0
		flush := func() {
			if m == 0 {
				return
			}
			// sendmmsg stops at the first message the kernel refuses:
			// count that one and go on with the rest.
			for off := 0; off < m; {
				sent, err := sc.call.sendmmsg(s.rc, sc.msgs[off:m])
				off += sent
				total += sent
				b.stats.txMessages.Add(uint64(sent))
				b.stats.txPackets.Add(uint64(sent))
				if err == nil {
					break
				}
				if errors.Is(err, net.ErrClosed) {
					b.stats.sendErrors.Add(uint64(m - off))
					if first == nil {
						first = ErrBindClosed
					}
					break
				}
				var errno unix.Errno
				if h := &sc.msgs[off].Hdr; h.Controllen > 0 && errors.As(err, &errno) && stickyErrno(errno) {
					// As in sendChunk: the local address the source
					// wrote to went away; let the kernel choose.
					h.Control = nil
					h.SetControllen(0)
					b.stats.stickyFallback.Add(1)
					continue
				}
				fail(fmt.Errorf("conn: send to %v: %w", sc.nameAt(off), os.NewSyscallError("sendmmsg", err)))
				off++
			}
			sc.forget(m)
			m = 0
		}
		for i := range n {
			dst := netip.AddrPortFrom(eps[i].Dst.Addr().Unmap(), eps[i].Dst.Port())
			if !dst.Addr().IsValid() || dst.Port() == 0 {
				if !v6 { // count it once, not per family
					fail(fmt.Errorf("conn: send to invalid endpoint %v", eps[i].Dst))
				}
				continue
			}
			if dst.Addr().Is6() != v6 {
				continue
			}
			if s == nil {
				fail(fmt.Errorf("conn: send to %v: no socket of that address family", dst))
				continue
			}
			setIov(&sc.iovs[m], bufs[i])
			nl := putSockaddr(&sc.names[m], dst, scopeOf(dst.Addr(), eps[i].SrcIfIndex))
			src := stickySource(s, eps[i], dst)
			sc.setMsg(m, m, 1, &sc.names[m][0], uint32(nl), control{src: src.addr, ifIndex: src.ifIndex})
			m++
			if m == len(sc.msgs) {
				flush()
			}
		}
		flush()
	}
	return total, first
}
