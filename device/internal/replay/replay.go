// Package replay rejects replayed and too-old transport message counters
// with a fixed-size sliding bitmap (WireGuard paper 5.4.6, RFC 6479).
//
// The bitmap is a ring of 64-bit words. When the highest counter moves
// forward, whole words are cleared instead of shifting the bitmap, so an
// advance costs at most one pass over the ring no matter how far it jumps.
// One extra word beyond WindowSize bits is kept because the word holding
// the highest counter is only partly in use: the ring therefore always holds
// at least WindowSize full counters behind the highest one.
package replay

import "github.com/fips-go/fips-go/device/noise"

// WindowSize is how far behind the highest accepted counter a counter may
// be and still be accepted (if not seen before). A counter c is inside the
// window when highest-c <= WindowSize.
const WindowSize = 8192

const (
	wordBits  = 64
	ringWords = WindowSize/wordBits + 1 // +1: the partly used current word
)

// Window is the replay state of one receiving keypair. The zero value is
// ready and accepts counter 0. It holds a fixed array and never allocates.
//
// Window is not safe for concurrent use: the receive path checks counters
// in the per-peer in-order stage, after decryption has authenticated them.
type Window struct {
	// highest is the largest counter accepted so far (0 before any).
	highest uint64
	// ring holds one bit per counter, counter c at bit c%64 of word
	// (c/64)%ringWords. Words newer than highest's word are kept zeroed.
	ring [ringWords]uint64
}

// Accept reports whether counter is fresh and, if so, records it. It returns
// true exactly once per counter inside the window, and false for duplicates,
// counters more than WindowSize behind the highest accepted one, and
// counters at or beyond noise.RejectAfterMessages (a keypair must never
// carry that many messages, so such a counter can only be forged or a bug).
//
// Call it only for messages that have been authenticated: an unauthenticated
// counter would let an attacker move the window forward.
func (w *Window) Accept(counter uint64) bool {
	if counter >= noise.RejectAfterMessages {
		return false
	}
	block := counter / wordBits
	if counter > w.highest {
		w.advance(block)
		w.highest = counter
	} else if w.highest-counter > WindowSize {
		return false
	}
	idx := block % ringWords
	bit := uint64(1) << (counter % wordBits)
	if w.ring[idx]&bit != 0 {
		return false
	}
	w.ring[idx] |= bit
	return true
}

// advance clears the words that the new highest block reuses. Blocks between
// the old highest block (exclusive) and the new one (inclusive) are cleared;
// beyond ringWords of distance every word is stale, so the loop is bounded.
func (w *Window) advance(block uint64) {
	current := w.highest / wordBits
	diff := block - current
	if diff > ringWords {
		diff = ringWords
	}
	for i := uint64(1); i <= diff; i++ {
		w.ring[(current+i)%ringWords] = 0
	}
}

// Reset forgets every counter, as for a fresh keypair.
func (w *Window) Reset() {
	*w = Window{}
}
