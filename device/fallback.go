package device

import (
	"sync"

	"github.com/fips-go/fips-go/conn"
)

// fallback chooses the transport of a peer configured with
// conn.TransportAuto, one handshake initiation at a time: UDP first; once
// fallbackAfter initiations in a row went unanswered, the stream, to the
// same address and port number (the peer's stream listener follows its UDP
// port by default); and while on the stream, the first initiation of each
// new attempt (the rekey of a running session) goes over UDP as a probe.
// An answer over UDP moves the peer back there, as roaming moves any peer:
// the response's endpoint becomes the peer's. A probe that goes unanswered
// costs one retry (Rekey-Timeout), well inside the old session's life.
type fallback struct {
	mu         sync.Mutex // guards the fields below; a leaf
	auto       bool       // the peer is configured with TransportAuto
	unanswered int        // initiations since the last response
}

// fallbackAfter is how many unanswered initiations over UDP send the next
// one over the stream: one lost initiation costs Rekey-Timeout (5 s), so
// the stream is tried about 5 s after a first attempt.
const fallbackAfter = 1

// set turns the policy on or off (configuration).
func (f *fallback) set(auto bool) {
	f.mu.Lock()
	f.auto, f.unanswered = auto, 0
	f.mu.Unlock()
}

// pick returns the endpoint the next initiation goes to, given the peer's
// current one, and whether the peer should move there (persist) or only
// probe it with this initiation.
func (f *fallback) pick(ep conn.Endpoint) (next conn.Endpoint, persist bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.auto {
		return ep, false
	}
	f.unanswered++
	next = ep
	switch ep.Transport {
	case conn.TransportUDP:
		if f.unanswered > fallbackAfter {
			next.Transport = conn.TransportTCP
			next.ClearSrc()
			return next, true
		}
	case conn.TransportTCP:
		if f.unanswered == 1 {
			next.Transport = conn.TransportUDP
			return next, false
		}
	}
	return ep, false
}

// answered records a handshake response.
func (f *fallback) answered() {
	f.mu.Lock()
	f.unanswered = 0
	f.mu.Unlock()
}

// endpointTransport is the transport an endpoint configured with t starts
// on.
func endpointTransport(t conn.Transport) conn.Transport {
	if t == conn.TransportAuto {
		return conn.TransportUDP
	}
	return t
}
