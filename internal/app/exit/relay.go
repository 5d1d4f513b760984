package exit

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// The TCP relay's rules. Each direction owns one fixed buffer of
// relayBufSize bytes and copies read-then-write: while a write waits (the
// receiver's window is shut) the direction reads nothing more, its
// source's receive buffer fills, and the source's advertised window
// closes. No other queue sits between the two sockets, so what a flow
// can hold is the two socket buffers on each side plus two relay buffers.
const relayBufSize = 64 << 10

// The netstack's own TCP buffers are the larger part of a flow: up to
// TCPSendBuffer (6 MiB) of data for the peer not yet acknowledged, up to
// TCPReceiveBufferMax (8 MiB) of the peer's data the host side has not
// taken. One flow may use them all (that is what 8 MiB in flight needs);
// many flows share a budget per direction instead, so 100 flows do not
// pin 1.4 GiB.
const (
	// DefaultBufferBudget is Options.BufferBudget's default, per direction.
	DefaultBufferBudget = 64 << 20
	// minBufferShare is the least a flow is given however many are open.
	minBufferShare = 64 << 10
)

// bufferShare is each TCP flow's buffer size in one direction when n
// flows are open: an equal share of budget, at most hi and at least
// minBufferShare, rounded down to a power of two so that the shares
// change (and every open flow is resized) only when the count doubles.
func bufferShare(budget, n, hi int) int {
	share := budget / max(n, 1)
	share = min(max(share, minBufferShare), hi)
	p := minBufferShare
	for p*2 <= share {
		p *= 2
	}
	if share >= hi {
		return hi
	}
	return p
}

// Directions: up is peer to host, down host to peer.
const (
	up   = 0
	down = 1
)

// event is what ended a direction's copy.
type event int

const (
	evEOF       event = iota // the source sent FIN
	evReset                  // reading the source failed: it was reset or closed
	evWriteFail              // writing the destination failed: it was reset or closed
)

// action is what the relay does to the sockets in response.
type action int

const (
	actNone       action = iota
	actCloseWrite        // send FIN to the direction's destination
	actClose             // both directions ended cleanly: close both sockets
	actAbort             // reset both sides (RST where still connected)
)

// relayState is the relay's pure state: which directions have seen FIN,
// and whether the relay is over.
type relayState struct {
	eof  [2]bool
	done bool
}

// step applies an event of direction dir and says what to do.
func (s *relayState) step(dir int, ev event) action {
	if s.done {
		return actNone
	}
	switch ev {
	case evEOF:
		s.eof[dir] = true
		if s.eof[up] && s.eof[down] {
			s.done = true
			return actClose
		}
		return actCloseWrite
	default:
		// A reset on one side becomes a reset on the other; a failed
		// write means the destination is gone the same way.
		s.done = true
		return actAbort
	}
}

// side is one socket of a relayed flow.
type side interface {
	io.ReadWriter
	CloseWrite() error
	Close() error
}

// relay splices a (peer side) and b (host side) until both directions
// end or one side resets. abortA and abortB reset a side. inUse counts the
// relay buffer bytes holding data right now; moved counts bytes by
// direction; touch is called on progress.
type relay struct {
	a, b           side
	abortA, abortB func()
	inUse          *atomic.Int64
	moved          [2]*atomic.Uint64
	touch          func()

	mu sync.Mutex
	st relayState // guarded by mu
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, relayBufSize); return &b }}

// run copies both directions and returns when both are over.
func (r *relay) run() {
	var wg sync.WaitGroup
	wg.Go(func() { r.pump(up, r.a, r.b) })
	r.pump(down, r.b, r.a)
	wg.Wait()
}

func (r *relay) pump(dir int, src, dst side) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.inUse.Add(int64(n))
			r.touch()
			w, werr := dst.Write(buf[:n])
			r.inUse.Add(-int64(n))
			r.moved[dir].Add(uint64(w))
			if werr != nil {
				r.apply(dir, evWriteFail)
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				r.apply(dir, evEOF)
			} else {
				r.apply(dir, evReset)
			}
			return
		}
	}
}

func (r *relay) apply(dir int, ev event) {
	r.mu.Lock()
	act := r.st.step(dir, ev)
	r.mu.Unlock()
	switch act {
	case actCloseWrite:
		dst := r.b
		if dir == down {
			dst = r.a
		}
		dst.CloseWrite()
	case actClose:
		r.a.Close()
		r.b.Close()
	case actAbort:
		r.abort()
	}
}

// abort resets both sides; also called when the flow idles out or the
// exit closes.
func (r *relay) abort() {
	r.mu.Lock()
	r.st.done = true
	r.mu.Unlock()
	r.abortA()
	r.abortB()
}

// abortTCP resets a host socket: linger 0 makes close send a RST.
func abortTCP(c *net.TCPConn) {
	c.SetLinger(0)
	c.Close()
}

// connectReason says why a host connect failed.
func connectReason(err error) Reason {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return ReasonConnRefused
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return ReasonUnreachable
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return ReasonConnTimeout
	}
	return ReasonConnError
}
