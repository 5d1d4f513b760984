package device

import "sync"

// sequencer keeps one peer's batches in the order they were handed to the
// crypto workers and releases them in that order once each is done. It has
// no goroutine: whichever worker finishes the batch at the head flushes it,
// and any batches behind it that are already done, so idle peers cost
// nothing and a slow batch delays only its own peer.
type sequencer struct {
	// slots holds one token per queued or reserved batch: a producer
	// reserves before it takes any lock and waits while the queue is full,
	// which pushes back on the TUN (and, through it, on TCP) instead of
	// dropping packets.
	slots chan struct{}

	capacity int
	mu       sync.Mutex // guards ring, head, n, pushes
	ring     []*batch
	head     int
	n        int
	pushes   uint64 // batches ever pushed: the timer wheel's sign of activity

	// flushMu is held while flushing, so flushes of one peer never
	// interleave. Lock order: flushMu, then mu.
	flushMu sync.Mutex
	// ready is scratch for complete, guarded by flushMu. It is allocated
	// only while ring is (see complete), so ring != nil says whether the
	// sequencer holds buffers.
	ready []*batch
}

func newSequencer(capacity int) *sequencer {
	s := new(sequencer)
	s.init(capacity)
	return s
}

// init readies a zero sequencer. The ring and scratch are allocated on
// first use: idle peers pay only for the channel header.
func (s *sequencer) init(capacity int) {
	s.capacity, s.slots = capacity, make(chan struct{}, capacity)
}

// reserve waits for room for one batch; false if stop closed first. The
// caller must push or unreserve. It must not hold locks that a flush needs.
func (s *sequencer) reserve(stop <-chan struct{}) bool {
	select {
	case s.slots <- struct{}{}:
		return true
	case <-stop:
		return false
	}
}

func (s *sequencer) unreserve() { <-s.slots }

// push appends b into a reserved slot.
func (s *sequencer) push(b *batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ring == nil {
		s.ring = make([]*batch, s.capacity)
	}
	s.ring[(s.head+s.n)%len(s.ring)] = b
	s.n++
	s.pushes++
}

// popDone appends to ready every done batch at the head, in order, and
// removes them from the queue.
func (s *sequencer) popDone(ready []*batch) []*batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.n > 0 {
		b := s.ring[s.head]
		if !b.done.Load() {
			break
		}
		ready = append(ready, b)
		s.ring[s.head] = nil
		s.head = (s.head + 1) % len(s.ring)
		s.n--
		<-s.slots
	}
	return ready
}

func (s *sequencer) headDone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n > 0 && s.ring[s.head].done.Load()
}

// complete marks b done and flushes every done batch at the head, in order,
// through flush, which gets all that are ready at once so that it can send
// them in one go. If another goroutine is flushing, it leaves the work to
// it; the re-check after unlocking closes the gap where that goroutine had
// already looked at the head before b was marked.
func (s *sequencer) complete(b *batch, flush func([]*batch)) {
	b.done.Store(true)
	for {
		if !s.flushMu.TryLock() {
			return
		}
		// Allocate only with something to flush: then the ring exists and,
		// as shrink needs flushMu, goes on existing while ready does.
		if s.ready == nil && s.headDone() {
			s.ready = make([]*batch, 0, s.capacity)
		}
		for s.ready != nil {
			s.ready = s.popDone(s.ready[:0])
			if len(s.ready) == 0 {
				break
			}
			flush(s.ready)
			clear(s.ready)
		}
		s.flushMu.Unlock()
		if !s.headDone() {
			return
		}
	}
}

// usage returns how many batches were ever pushed and whether the ring and
// scratch are allocated, for the timer wheel's idle check.
func (s *sequencer) usage() (pushes uint64, held bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pushes, s.ring != nil
}

// shrink frees the ring and scratch when nothing is queued or reserved, so
// that an idle peer costs what a never-used one does; the next push
// allocates them again. also, if not nil, runs under flushMu to free what
// the owner keeps under it. It never waits for a flush: false means busy.
func (s *sequencer) shrink(also func()) bool {
	if !s.flushMu.TryLock() {
		return false
	}
	defer s.flushMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	// A reservation is a push on its way; push would re-allocate the ring,
	// but freeing it under a producer that just waited for room is churn.
	if s.n != 0 || len(s.slots) != 0 {
		return false
	}
	s.ring, s.head, s.ready = nil, 0, nil
	if also != nil {
		also()
	}
	return true
}
