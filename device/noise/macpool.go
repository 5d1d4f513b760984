package noise

import (
	"hash"
	"sync"

	"golang.org/x/crypto/blake2s"
)

// macHasher is a keyed BLAKE2s-128 kept for reuse, with its own output
// buffer: an output slice on the caller's stack would escape to the heap
// through the hash.Hash interface.
type macHasher struct {
	h   hash.Hash
	out [macSize]byte
}

// macPool computes MACs under one fixed key without allocating in steady
// state. Checking MAC1 runs on the receive goroutine for every handshake
// message, a flood's included; keying a new hash each time cost two
// allocations per message.
type macPool struct {
	key  [hashSize]byte
	pool sync.Pool // *macHasher keyed with key
}

func (m *macPool) mac(msg []byte) [macSize]byte {
	x, _ := m.pool.Get().(*macHasher)
	if x == nil {
		h, err := blake2s.New128(m.key[:])
		if err != nil {
			// Keys here are always 32 bytes; an empty MAC is never
			// accepted by a constant-time compare against a real one.
			return [macSize]byte{}
		}
		x = &macHasher{h: h}
	} else {
		x.h.Reset()
	}
	x.h.Write(msg)
	x.h.Sum(x.out[:0])
	out := x.out
	m.pool.Put(x)
	return out
}
