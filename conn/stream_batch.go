package conn

import (
	"net"
	"sync"
)

// tlsBatchBytes bounds what a batchConn holds before it writes: crypto/tls
// writes each record (at most 16 KiB) in its own system call, and this
// many bytes of records go out in one instead.
const tlsBatchBytes = 128 << 10

// batchConn sits under a tls.Conn and gathers the records of one write of
// the send queue into a single write to the TCP connection. It gathers
// only between begin and flush, which the connection's writer calls around
// its tls.Conn.Write: the handshake, alerts and anything else crypto/tls
// writes on its own pass straight through (or, if written inside that
// window, go out with its flush, in order).
type batchConn struct {
	net.Conn

	mu  sync.Mutex // guards on and buf; held across the TCP write so order holds
	on  bool
	buf []byte // at most tlsBatchBytes; nil when idle
}

func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.on {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
		return b.Conn.Write(p)
	}
	if len(b.buf)+len(p) > tlsBatchBytes {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > tlsBatchBytes {
			return b.Conn.Write(p)
		}
	}
	if b.buf == nil {
		b.buf = make([]byte, 0, tlsBatchBytes)
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// begin starts gathering.
func (b *batchConn) begin() {
	b.mu.Lock()
	b.on = true
	b.mu.Unlock()
}

// flush writes what was gathered and stops gathering. The buffer is kept
// for the next write: a connection that carries traffic reuses it.
func (b *batchConn) flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.on = false
	return b.flushLocked()
}

func (b *batchConn) flushLocked() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.Conn.Write(b.buf)
	b.buf = b.buf[:0]
	return err
}

// release drops the buffer of a connection that is closed.
func (b *batchConn) release() {
	b.mu.Lock()
	b.buf, b.on = nil, false
	b.mu.Unlock()
}
