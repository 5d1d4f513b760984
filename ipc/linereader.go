package ipc

import (
	"bufio"
	"errors"
	"io"
)

// MaxLine is the longest UAPI line accepted, newline included. The longest
// legitimate line (an endpoint with a scoped IPv6 address) is under 100
// bytes; anything past this is garbage or an attack and is not buffered.
const MaxLine = 4096

var (
	errLineTooLong = errors.New("line too long")
	errTooLarge    = errors.New("request too large")
	errNoNewline   = errors.New("stream ended in the middle of a line")
)

// lineReader reads '\n'-terminated lines from a bufio.Reader without reading
// past the current line, so a connection's next request stays in the buffer,
// and without ever holding more than MaxLine bytes of one line or reading
// more than limit bytes in total.
type lineReader struct {
	br    *bufio.Reader
	n     int64 // bytes consumed so far
	limit int64 // n may not exceed this
	buf   []byte
}

func newLineReader(r io.Reader, limit int64) *lineReader {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, MaxLine)
	}
	return &lineReader{br: br, limit: limit}
}

// next returns the next line without its '\n'. The slice is valid until the
// next call. Errors: errLineTooLong (the whole line was consumed and the
// stream is still in sync), errTooLarge (the limit was hit mid-stream),
// io.EOF (clean end before any byte of a line), errNoNewline, or a read error.
func (lr *lineReader) next() ([]byte, error) {
	lr.buf = lr.buf[:0]
	tooLong := false
	for {
		chunk, err := lr.br.ReadSlice('\n')
		lr.n += int64(len(chunk))
		if lr.n > lr.limit {
			return nil, errTooLarge
		}
		if !tooLong {
			switch {
			case len(lr.buf)+len(chunk) > MaxLine:
				tooLong = true
				lr.buf = lr.buf[:0]
			case err == nil && len(lr.buf) == 0:
				// Common case: the whole line sits in bufio's buffer.
				return chunk[:len(chunk)-1], nil
			default:
				lr.buf = append(lr.buf, chunk...)
			}
		}
		switch {
		case err == nil:
			if tooLong {
				return nil, errLineTooLong
			}
			return lr.buf[:len(lr.buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(lr.buf) > 0 || tooLong || len(chunk) > 0 {
				return nil, errNoNewline
			}
			return nil, io.EOF
		default:
			return nil, err
		}
	}
}
