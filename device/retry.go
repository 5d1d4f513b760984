package device

import "time"

// retryPolicy decides what a reader does after a read fails: how long to
// wait before reading again, and whether to give up. Only "the device is
// gone" stops a reader outright; every other error is survived, but a
// persistent one must not spin a core, and a deterministic panic must not
// become a silent busy loop. It is fed outcomes and holds no clock, so the
// goroutines that use it do the sleeping.
type retryPolicy struct {
	fails  int // failed reads since the last one that made progress
	panics int // of those, the ones that panicked
}

const (
	// retryMinWait is the first pause, after the second failure in a row:
	// a lone failure (one bad super-packet) retries at once.
	retryMinWait = time.Millisecond
	// retryMaxWait caps the pause: long enough that a persistent error
	// costs nothing measurable, short enough that a recovered TUN or
	// socket is read again before any TCP retransmission timer fires.
	retryMaxWait = 100 * time.Millisecond
	// persistentAfter is the failure count at which the pause first
	// reaches retryMaxWait: the error is no longer transient and is worth
	// one log line.
	persistentAfter = 9
	// maxReadPanics panics in a row, with the MTU re-read after each, stop
	// the device: a panic that a larger buffer does not cure will recur.
	maxReadPanics = 5
)

// ok records a read that made progress; failures start over.
func (r *retryPolicy) ok() { *r = retryPolicy{} }

// failed records a read that failed and returns the pause before the next:
// none after the first failure, then 1 ms, doubling up to retryMaxWait.
func (r *retryPolicy) failed() time.Duration {
	r.fails++
	if r.fails == 1 {
		return 0
	}
	// Shifts beyond 7 would pass retryMaxWait anyway; capping the shift
	// keeps a long streak from overflowing.
	return min(retryMinWait<<min(r.fails-2, 7), retryMaxWait)
}

// panicked records a read that panicked: the pause as for failed, and
// whether that was one panic too many.
func (r *retryPolicy) panicked() (wait time.Duration, giveUp bool) {
	r.panics++
	return r.failed(), r.panics >= maxReadPanics
}

// persistent reports whether the latest failure is the one at which the
// streak counts as persistent (once per streak, for logging).
func (r *retryPolicy) persistent() bool { return r.fails == persistentAfter }
