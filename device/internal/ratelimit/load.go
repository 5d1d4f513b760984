package ratelimit

import (
	"sync/atomic"
	"time"
)

// LoadHold is how long a device stays under load after its handshake queue
// was last seen a quarter full. Deciding per message, with no hold, let a
// burst of initiations through to the Diffie-Hellman work as soon as the
// queue drained between bursts (hundreds of DH computations per burst of
// 1,024); wireguard-go holds for a second too.
const LoadHold = time.Second

// LoadGauge decides whether a device is under load, from its handshake
// queue's depth and the time. The zero value is not under load. It is
// pure (the caller passes the time) and safe for concurrent use.
type LoadGauge struct {
	until atomic.Int64 // Unix nanoseconds until which load holds
}

// Observe reports whether the device is under load, given queued messages
// of a queue of the given capacity at now: from the moment the queue is a
// quarter full until LoadHold after it was last seen so.
func (g *LoadGauge) Observe(queued, capacity int, now time.Time) bool {
	t := now.UnixNano()
	if queued >= max(1, capacity/4) {
		end := t + int64(LoadHold)
		for {
			cur := g.until.Load()
			if cur >= end || g.until.CompareAndSwap(cur, end) {
				break
			}
		}
		return true
	}
	return t < g.until.Load()
}

// Mark puts the device under load from now until LoadHold later, whatever
// the queue holds: the device calls it when it turns messages away before
// they reach the queue, so a flood kept out of the queue still counts.
func (g *LoadGauge) Mark(now time.Time) {
	g.Observe(1, 1, now)
}
