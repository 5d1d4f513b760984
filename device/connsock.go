package device

import (
	"net/netip"
	"sync"

	"github.com/fips-go/fips-go/conn"
)

// peerSockets are the connected sockets (conn.ConnectBind) the device holds
// for its peers' endpoints: one per endpoint address, shared by the peers
// that have it (refs). The kernel queues a connected endpoint's datagrams
// on its own socket, where a spoofed flood on the shared socket cannot
// crowd them out, and the bind sends to that endpoint through it. The
// bind reads all of them through its ConnectedReceiveFuncs, which the
// device runs like the shared sockets' receivers (receiver, unpaced):
// the goroutines do not grow with the sockets. What arrives on them is
// authenticated like anything else.
// Binds without connected sockets (portable, in-memory), a full cap or a
// failed connect leave the endpoint on the shared socket, as before.
type peerSockets struct {
	// mu guards the fields below. It is taken under Peer.epMu (endpoint
	// changes) and under cfgMu (rebind, teardown), and holds bind calls
	// (Connect, Close) inside; it nests no device lock.
	mu     sync.Mutex
	m      map[netip.AddrPort]*peerSocket
	closed bool // the device is stopping: no new sockets or readers
}

type peerSocket struct {
	pc   conn.PeerConn // nil: the endpoint uses the shared socket
	refs int
}

// move follows one peer's endpoint from old (when hadOld) to new (when
// hasNew); Peer.epMu is held. A new sticky source on the same address
// reconnects the socket from that source, since a connected socket's
// source is fixed and the peer now writes to another of our addresses.
func (s *peerSockets) move(d *Device, old conn.Endpoint, hadOld bool, new conn.Endpoint, hasNew bool) {
	cb, ok := s.lock(d)
	if !ok {
		return
	}
	defer s.mu.Unlock()
	if hadOld && hasNew && old.Dst == new.Dst {
		if e := s.m[new.Dst]; e != nil && stale(e.pc, new) {
			s.replace(d, cb, e, new)
		}
		return
	}
	if hadOld {
		s.unref(old.Dst)
	}
	if hasNew {
		s.ref(d, cb, new)
	}
}

// stale reports whether pc (nil: none) should be replaced for ep.
func stale(pc conn.PeerConn, ep conn.Endpoint) bool {
	if pc == nil {
		return true
	}
	src := ep.Src.Unmap()
	return src.IsValid() && src != pc.Endpoint().Src
}

func (s *peerSockets) ref(d *Device, cb conn.ConnectBind, ep conn.Endpoint) {
	if e := s.m[ep.Dst]; e != nil {
		e.refs++
		return
	}
	if s.m == nil {
		s.m = make(map[netip.AddrPort]*peerSocket)
	}
	var pc conn.PeerConn
	if ep.Transport == conn.TransportUDP {
		// A stream endpoint has its TCP connection instead.
		pc = s.connect(d, cb, ep)
	}
	s.m[ep.Dst] = &peerSocket{pc: pc, refs: 1}
}

func (s *peerSockets) unref(dst netip.AddrPort) {
	e := s.m[dst]
	if e == nil {
		return
	}
	if e.refs--; e.refs > 0 {
		return
	}
	if e.pc != nil {
		e.pc.Close()
	}
	delete(s.m, dst)
}

// replace closes e's socket and connects a new one for ep.
func (s *peerSockets) replace(d *Device, cb conn.ConnectBind, e *peerSocket, ep conn.Endpoint) {
	if e.pc != nil {
		e.pc.Close()
	}
	e.pc = s.connect(d, cb, ep)
}

// connect asks the bind for a socket, which the bind's connected-socket
// reader serves from then on; nil when the bind refuses (it counts why:
// bind_conn_failures).
func (s *peerSockets) connect(d *Device, cb conn.ConnectBind, ep conn.Endpoint) conn.PeerConn {
	pc, err := cb.Connect(ep)
	if err != nil {
		return nil
	}
	return pc
}

// reconnectAll gives every endpoint a new socket on the bind as it is now
// (after a rebind closed the old ones). The peers' sticky sources were
// cleared, so each connects from the kernel's choice.
func (s *peerSockets) reconnectAll(d *Device) {
	cb, ok := s.lock(d)
	if !ok {
		return
	}
	defer s.mu.Unlock()
	for dst, e := range s.m {
		s.replace(d, cb, e, conn.Endpoint{Dst: dst})
	}
}

// shutdown closes every socket for good (device teardown); their readers
// return.
func (s *peerSockets) shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, e := range s.m {
		if e.pc != nil {
			e.pc.Close()
		}
	}
	s.m = nil
}

// count is how many endpoints have a socket, and how many peers' endpoints
// are tracked (for tests and status).
func (s *peerSockets) count() (open, endpoints int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.m {
		if e.pc != nil {
			open++
		}
	}
	return open, len(s.m)
}

// lock takes mu and returns the device's bind as a ConnectBind; false (mu
// not held) when the bind has no connected sockets or the device stops.
func (s *peerSockets) lock(d *Device) (conn.ConnectBind, bool) {
	cb, ok := d.bind.(conn.ConnectBind)
	if !ok {
		return nil, false
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, false
	}
	return cb, true
}
