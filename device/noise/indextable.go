package noise

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
)

// maxIndexDraws bounds how often Insert draws a random index before giving
// up. With a healthy random source a draw collides with probability
// Len()/2^32, so reaching the bound means the source is broken (for example
// all zeros), and looping forever would hang the handshake path.
const maxIndexDraws = 64

// IndexTable maps the random receiver indices we hand out (in handshake
// messages) to what they stand for: an in-flight handshake or a keypair. It
// is safe for concurrent use; Lookup, the data path's call, takes only a
// read lock and allocates nothing.
type IndexTable[T any] struct {
	randMu sync.Mutex // guards rand: the reader need not be goroutine-safe
	rand   io.Reader

	mu      sync.RWMutex // guards entries
	entries map[uint32]T
}

// NewIndexTable returns an empty table drawing indices from rand.
func NewIndexTable[T any](rand io.Reader) *IndexTable[T] {
	return &IndexTable[T]{rand: rand, entries: make(map[uint32]T)}
}

// Insert stores v under a random, unused, non-zero index and returns it.
// Zero is never used so that it can mean "no index".
func (t *IndexTable[T]) Insert(v T) (uint32, error) {
	for range maxIndexDraws {
		idx, err := t.draw()
		if err != nil {
			return 0, err
		}
		if idx == 0 {
			continue
		}
		t.mu.Lock()
		if _, used := t.entries[idx]; !used {
			t.entries[idx] = v
			t.mu.Unlock()
			return idx, nil
		}
		t.mu.Unlock()
	}
	return 0, fmt.Errorf("%w after %d draws", ErrIndexSpace, maxIndexDraws)
}

// draw reads one candidate index. Reading outside t.mu keeps a slow random
// source from stalling Lookup on the data path.
func (t *IndexTable[T]) draw() (uint32, error) {
	var b [4]byte
	t.randMu.Lock()
	_, err := io.ReadFull(t.rand, b[:])
	t.randMu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrRandom, err)
	}
	return binary.LittleEndian.Uint32(b[:]), nil
}

// Replace stores v under idx if idx is in use (a handshake's index passing
// to the keypair derived from it) and reports whether it was.
func (t *IndexTable[T]) Replace(idx uint32, v T) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.entries[idx]; !ok {
		return false
	}
	t.entries[idx] = v
	return true
}

// Lookup returns the value stored under idx.
func (t *IndexTable[T]) Lookup(idx uint32) (T, bool) {
	t.mu.RLock()
	v, ok := t.entries[idx]
	t.mu.RUnlock()
	return v, ok
}

// Delete frees idx; deleting an unused index (including 0) does nothing.
func (t *IndexTable[T]) Delete(idx uint32) {
	t.mu.Lock()
	delete(t.entries, idx)
	t.mu.Unlock()
}

// Len returns the number of indices in use.
func (t *IndexTable[T]) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.entries)
}
