package interop

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"
)

// transferTimeout bounds one transfer so a stalled tunnel fails the test
// instead of hanging it; it is a guard, not a performance assertion.
const transferTimeout = 5 * time.Minute

// stream is size bytes of ChaCha8 output from seed: cheap to produce on
// one end and to recompute on the other.
func stream(seed uint64, size int64) io.Reader {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	return io.LimitReader(rand.NewChaCha8(s), size)
}

// sumResult is what the receiving end of a transfer saw.
type sumResult struct {
	n   int64
	sum [32]byte
	err error
}

// transfer sends size bytes of stream(seed) from one node to the other
// over one TCP connection through the tunnel and checks that exactly those
// bytes arrived: the receiver's count and SHA-256 against the sender's.
func transfer(t testing.TB, from, to node, port uint16, size int64, seed uint64) {
	t.Helper()
	if err := tryTransfer(from, to, port, size, seed); err != nil {
		t.Fatal(err)
	}
}

// tryTransfer is transfer returning its failure, for use off the test's
// goroutine.
func tryTransfer(from, to node, port uint16, size int64, seed uint64) error {
	dir := from.name() + " -> " + to.name()
	at := netip.AddrPortFrom(to.addr(), port)
	ln, err := to.listenTCP(at)
	if err != nil {
		return fmt.Errorf("%s: listen %v: %w", dir, at, err)
	}
	defer ln.Close()
	got := make(chan sumResult, 1)
	go receive(ln, got)

	ctx, cancel := context.WithTimeout(context.Background(), transferTimeout)
	defer cancel()
	c, err := from.dialTCP(ctx, at)
	if err != nil {
		return fmt.Errorf("%s: dial %v: %w", dir, at, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(transferTimeout))
	h := sha256.New()
	n, err := io.CopyBuffer(io.MultiWriter(c, h), stream(seed, size), make([]byte, 128<<10))
	if err != nil {
		return fmt.Errorf("%s: sent %d of %d bytes: %w", dir, n, size, err)
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		err = cw.CloseWrite()
	} else {
		err = c.Close()
	}
	if err != nil {
		return fmt.Errorf("%s: ending the stream: %w", dir, err)
	}
	r := <-got
	switch want := [32]byte(h.Sum(nil)); {
	case r.err != nil:
		return fmt.Errorf("%s: receiver got %d of %d bytes: %w", dir, r.n, size, r.err)
	case r.n != size:
		return fmt.Errorf("%s: receiver got %d bytes, sent %d", dir, r.n, size)
	case r.sum != want:
		return fmt.Errorf("%s: %d bytes arrived but differ: sha256 %x, sent %x", dir, size, r.sum, want)
	}
	return nil
}

// receive accepts one connection and reports how many bytes it carried
// until EOF and their SHA-256.
func receive(ln net.Listener, got chan<- sumResult) {
	c, err := ln.Accept()
	if err != nil {
		got <- sumResult{err: fmt.Errorf("accept: %w", err)}
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(transferTimeout))
	h := sha256.New()
	n, err := io.CopyBuffer(h, c, make([]byte, 256<<10))
	got <- sumResult{n: n, sum: [32]byte(h.Sum(nil)), err: err}
}
