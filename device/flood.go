package device

import (
	"sync"
	"sync/atomic"

	"github.com/fips-go/fips-go/device/internal/ratelimit"
)

// floodDefence is the state of the handshake-flood defence: the two
// handshake queues, the limits that decide what enters them, and the
// cookie mode. Its rules are in triage (hsqueue.go), the handshake
// workers (handshake.go) and the receivers' shedding (receiver.go);
// docs/architecture.md ("Handshake floods buy little") says why.
//
// The queues and limits lock themselves; shedMu guards only changes of
// shedding together with the bind's Shed.
type floodDefence struct {
	hsq          *hsQueue            // handshake messages from anyone
	hsqPrio      *hsQueue            // ... that proved their source or answer our handshake
	load         ratelimit.LoadGauge // cookie mode, with its hold time
	limit        *ratelimit.Limiter  // handshake messages per source address
	limitKnown   *ratelimit.Limiter  // priority slots without MAC2, per known address
	strangers    *ratelimit.Bucket   // MAC2-proven initiations from unknown endpoints
	strangerTime *ratelimit.Share    // the time those initiations' handling takes
	knownTime    *ratelimit.Share    // the time known endpoints' initiations without MAC2 take
	anonTime     *ratelimit.Share    // the time other initiations without MAC2 take, unanswered; nil: none
	answered     atomic.Uint64       // initiations answered: configured peers', fresh (see receiver)
	yield        ratelimit.Yield     // whether the initiations worked on are mostly answered
	cookieBudget *ratelimit.Bucket   // what the anonymous queue may take under load
	limitCookies *ratelimit.Limiter  // the same, per address
	shedMu       sync.Mutex          // serializes changes of shedding and the bind's Shed
	shedding     atomic.Bool         // the bind sheds a flood (conn.Shedder); set under shedMu
}

// init sizes the queues and limits from o, whose defaults are set.
func (f *floodDefence) init(o *Options) {
	f.hsq = newHSQueue(o.handshakeQueue, hsBacklog*o.handshakeQueue)
	f.hsqPrio = newHSQueue(max(16, o.handshakeQueue/4), 0)
	f.limit = ratelimit.New(ratelimit.Options{})
	// limitKnown bounds what a spoofer of a known endpoint gets.
	f.limitKnown = ratelimit.New(ratelimit.Options{})
	f.strangers = ratelimit.NewBucket(o.strangerHandshakes, o.strangerHandshakes/10)
	f.strangerTime = ratelimit.NewShare(o.strangerHandshakeTime, o.strangerHandshakeTime)
	f.knownTime = ratelimit.NewShare(knownUnprovenTime, knownUnprovenTime)
	if o.anonymousHandshakeTime > 0 {
		f.anonTime = ratelimit.NewShare(o.anonymousHandshakeTime, o.anonymousHandshakeTime)
	}
	f.cookieBudget = ratelimit.NewBucket(o.cookieReplies, o.cookieReplies/10)
	f.limitCookies = ratelimit.New(ratelimit.Options{})
}
