// Package streamframe carries datagrams over a byte stream in the framing
// Mullvad's udp-over-tcp uses, so that a WireGuard peer can reach another
// across a network that passes only TCP.
//
// Each datagram is preceded by its length as a 16-bit big-endian integer:
//
//	 0               1               2
//	+-------+-------+-------+-------+-- ... --+
//	|  length (BE)  |  datagram, length bytes |
//	+-------+-------+-------+-------+-- ... --+
//
// A length of 0 carries nothing and is treated as a broken stream: no
// WireGuard message is empty, and a peer that sends one is not speaking
// this protocol.
package streamframe

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
)

const (
	// HeaderLen is the length prefix's size.
	HeaderLen = 2
	// MaxPayload is the largest datagram a frame carries.
	MaxPayload = 1<<16 - 1
	// ReaderSize is the buffer a Reader needs to hold the largest frame
	// whole.
	ReaderSize = HeaderLen + MaxPayload
)

var (
	// ErrEmpty is a frame of length 0.
	ErrEmpty = errors.New("streamframe: zero-length frame")
	// ErrTooLong is a datagram longer than MaxPayload.
	ErrTooLong = errors.New("streamframe: datagram longer than 65535 bytes")
	// ErrIncomplete is returned by Parse when b does not hold a whole frame.
	ErrIncomplete = errors.New("streamframe: incomplete frame")
)

// Len is the framed size of a datagram of n bytes.
func Len(n int) int { return HeaderLen + n }

// Append appends p as one frame to dst. An empty or too long p is an error
// and leaves dst as it was.
func Append(dst, p []byte) ([]byte, error) {
	switch {
	case len(p) == 0:
		return dst, ErrEmpty
	case len(p) > MaxPayload:
		return dst, ErrTooLong
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(p)))
	return append(dst, p...), nil
}

// Parse splits the first frame off b: its datagram (a view into b) and what
// follows. ErrIncomplete means b ends inside the frame (read more);
// ErrEmpty means the stream is broken.
func Parse(b []byte) (p, rest []byte, err error) {
	if len(b) < HeaderLen {
		return nil, b, ErrIncomplete
	}
	n := int(binary.BigEndian.Uint16(b))
	if n == 0 {
		return nil, b, ErrEmpty
	}
	if len(b) < HeaderLen+n {
		return nil, b, ErrIncomplete
	}
	return b[HeaderLen : HeaderLen+n], b[HeaderLen+n:], nil
}

// Reader reads frames from a stream through one bounded buffer, so that
// many small frames cost one read system call.
type Reader struct {
	br   *bufio.Reader
	last int // bytes of the frame Next returned, discarded on the next call
}

// NewReader reads frames from r with a buffer of ReaderSize bytes.
func NewReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, ReaderSize)}
}

// Next returns the next datagram, a view valid until the following call.
// It blocks until a whole frame is buffered. At the end of the stream it
// returns io.EOF, or io.ErrUnexpectedEOF inside a frame; a zero length
// returns ErrEmpty.
func (r *Reader) Next() ([]byte, error) {
	r.discard()
	h, err := r.br.Peek(HeaderLen)
	if err != nil {
		if err == io.EOF && len(h) > 0 {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(h))
	if n == 0 {
		return nil, ErrEmpty
	}
	f, err := r.br.Peek(HeaderLen + n)
	if err != nil {
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	r.last = HeaderLen + n
	return f[HeaderLen:], nil
}

// Buffered reports whether a whole frame (or a zero length, which Next
// then reports) is already buffered, so that Next will not block.
func (r *Reader) Buffered() bool {
	have := r.br.Buffered() - r.last
	if have < HeaderLen {
		return false
	}
	h, _ := r.br.Peek(r.last + HeaderLen)
	n := int(binary.BigEndian.Uint16(h[r.last:]))
	return have >= HeaderLen+n
}

func (r *Reader) discard() {
	if r.last > 0 {
		r.br.Discard(r.last)
		r.last = 0
	}
}
