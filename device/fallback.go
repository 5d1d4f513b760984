package device

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/fips-go/fips-go/conn"
)

// fallback chooses the transport of a peer configured with
// conn.TransportAuto, one handshake initiation at a time:
//
//   - UDP first;
//   - once fallbackAfter initiations in a row went unanswered, the streams,
//     to the same address and port number (the peer's stream listener
//     follows its UDP port by default), raced as Happy Eyeballs races
//     addresses: the initiation goes over TCP, and raceDelay later, unless
//     answered meanwhile, the same initiation over TLS. The responder takes
//     whichever arrives first (the other is a replayed timestamp), answers
//     on that connection, and its response's endpoint becomes the peer's;
//     the losing connection is closed;
//   - while on a stream, the first initiation of each new attempt goes over
//     UDP as a probe; the next over the stream the peer is on; after that
//     the streams are raced again. New attempts come with each rekey, and
//     while data flows on a stream when a probe is due (probeDue): 5 s
//     after the fall back, then 10 s and 20 s after each handshake the
//     stream answered instead, then every probeEvery (probeAfter).
//
// An answer over UDP moves the peer back there, as roaming moves any peer.
// A probe that goes unanswered costs one 148-byte initiation over UDP and
// one retry (Rekey-Timeout) over the stream, a fresh handshake there,
// well inside the old session's life. The early probes catch UDP that was
// lost only for a moment; after them a peer that stays on a stream probes
// no more often than it did with probeEvery alone. The decisions are
// pure; the device does the sending (initiateAttempt) and the timing
// (raceDelay, probeDue).
type fallback struct {
	mu         sync.Mutex // guards the fields below; a leaf
	auto       bool       // the peer is configured with TransportAuto
	onStream   bool       // the last response came over a stream
	probed     uint8      // responses over a stream since the fall back, at most 255
	unanswered int32      // initiations since the last response
	// nextProbe is when a UDP probe is due (Unix ns; 0: none), read on
	// the send path without mu.
	nextProbe atomic.Int64
}

const (
	// fallbackAfter is how many unanswered initiations over UDP send the
	// next one over the streams: one lost initiation costs Rekey-Timeout
	// (5 s), so the streams are tried about 5 s after a first attempt.
	fallbackAfter = 1
	// raceDelay is how long TCP has before TLS is tried beside it: about
	// what a TCP handshake plus a WireGuard handshake take on a slow path,
	// short beside the 5 s the UDP attempt already cost.
	raceDelay = 250 * time.Millisecond
	// probeEvery is how often a peer on a stream that sends data tries
	// UDP again once the early probes (probeSchedule) are spent: the
	// switch back to UDP then takes at most this long plus Rekey-Timeout
	// once UDP passes. It also retries a probe whose handshake nothing
	// answered.
	probeEvery = 30 * time.Second
)

// probeSchedule is how long after the fall back (the first entry), and
// after each response over the stream that followed an unanswered probe
// (the next ones), the next UDP probe is due.
var probeSchedule = [...]time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second}

// probeAfter is when the next UDP probe is due after the n-th response
// over a stream since the fall back (0: the fall back itself).
func probeAfter(n int) time.Duration {
	if n < len(probeSchedule) {
		return probeSchedule[n]
	}
	return probeEvery
}

// attempt is what one initiation does: go to first now and, when race is
// set (valid Dst), to race raceDelay later unless answered meanwhile.
type attempt struct {
	first, race conn.Endpoint
}

// set turns the policy on or off (configuration).
func (f *fallback) set(auto bool) {
	f.mu.Lock()
	f.auto, f.unanswered = auto, 0
	f.onStream, f.probed = false, 0
	f.nextProbe.Store(0)
	f.mu.Unlock()
}

// pick returns where the next initiation goes, given the peer's current
// endpoint.
func (f *fallback) pick(ep conn.Endpoint) attempt {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.auto {
		return attempt{first: ep}
	}
	f.unanswered++
	via := func(t conn.Transport) conn.Endpoint {
		next := ep
		if next.Transport != t {
			next.Transport = t
			next.ClearSrc()
		}
		return next
	}
	race := attempt{first: via(conn.TransportTCP), race: via(conn.TransportTLS)}
	switch {
	case ep.Transport == conn.TransportUDP:
		if f.unanswered > fallbackAfter {
			return race
		}
	case f.unanswered == 1:
		return attempt{first: via(conn.TransportUDP)}
	case f.unanswered > 2:
		return race
	}
	return attempt{first: ep}
}

// answeredAt records a handshake response that came over t at now. It
// returns the stream transports whose connections the peer no longer
// needs (the loser of a race; both, back on UDP) and schedules the UDP
// probes while on a stream.
func (f *fallback) answeredAt(t conn.Transport, now time.Time) (drop []conn.Transport) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unanswered = 0
	switch {
	case !f.auto:
		return nil
	case !t.IsStream():
		f.onStream, f.probed = false, 0
		f.nextProbe.Store(0)
		return streamsBoth
	}
	// Every response over a stream after the one that moved the peer
	// there answered an attempt whose UDP probe went unanswered.
	if f.onStream && f.probed < 255 {
		f.probed++
	}
	f.onStream = true
	f.nextProbe.Store(now.Add(probeAfter(int(f.probed))).UnixNano())
	if t == conn.TransportTCP {
		return streamsTLS
	}
	return streamsTCP
}

var (
	streamsBoth = []conn.Transport{conn.TransportTCP, conn.TransportTLS}
	streamsTCP  = streamsBoth[:1]
	streamsTLS  = streamsBoth[1:]
)

// probeDue reports whether a peer on a stream should start a handshake
// (whose first initiation probes UDP): once when the probe answeredAt
// scheduled is due, and again every probeEvery while no response
// schedules the next.
func (f *fallback) probeDue(now time.Time) bool {
	at := f.nextProbe.Load()
	if at == 0 || now.UnixNano() < at {
		return false
	}
	return f.nextProbe.CompareAndSwap(at, now.Add(probeEvery).UnixNano())
}

// endpointTransport is the transport an endpoint configured with t starts
// on.
func endpointTransport(t conn.Transport) conn.Transport {
	if t == conn.TransportAuto {
		return conn.TransportUDP
	}
	return t
}
