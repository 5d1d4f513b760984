// Package pcap records a tunnel's inner packets in the classic libpcap file
// format, so tcpdump, tshark and Wireshark read a capture as they read their
// own.
//
// The file is the classic format, not pcapng: a 24-byte global header with
// the nanosecond-resolution magic, then one 16-byte record header and the
// packet's bytes per packet. The link type is LINKTYPE_RAW (101): a record
// is a bare IPv4 or IPv6 packet, as a TUN carries it, with no link header
// and so no direction; a capture of both directions shows each conversation
// as the hosts saw it.
//
// A tunnel captures by wrapping its TUN before the device gets it:
//
//	w, err := pcap.NewWriter(file, nil)
//	...
//	dev = pcap.Wrap(dev, w) // dev.Close also flushes and closes w
//
// The file grows with the traffic; a destination that must stay small
// limits itself (a write error stops the capture cleanly).
//
//	global header (little-endian, as the magic tells a reader)
//	+----------------+-------+-------+----------+---------+----------+----------+
//	| magic a1b23c4d | major | minor | thiszone | sigfigs | snaplen  | linktype |
//	| 4              | 2 (2) | 2 (4) | 4 (0)    | 4 (0)   | 4        | 4 (101)  |
//	+----------------+-------+-------+----------+---------+----------+----------+
//	record header, then incl_len bytes of packet
//	+---------+----------+----------+----------+
//	| ts_sec  | ts_nsec  | incl_len | orig_len |
//	| 4       | 4        | 4        | 4        |
//	+---------+----------+----------+----------+
package pcap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// File format constants.
const (
	// magicNano is the global header's magic for nanosecond timestamps.
	magicNano = 0xa1b23c4d
	// snapLen is the most bytes of one packet a record holds, the value
	// tcpdump uses; a TUN's packets are at most 64 KiB, so none is cut.
	snapLen = 262144
	// linkTypeRaw is LINKTYPE_RAW: records are bare IPv4 or IPv6 packets.
	linkTypeRaw = 101

	globalHeaderLen = 24
	recordHeaderLen = 16
	// bufSize is the bufio buffer: a batch of MTU-sized packets passes
	// through it in a few writes, and a write error surfaces per batch.
	bufSize = 64 << 10
)

// Writer writes packets to a pcap file. It is safe for concurrent use: a
// TUN's reader and writer record through the same Writer.
//
// Records are written on the caller's goroutine and flushed after each
// batch, so a capture read while the tunnel runs is fresh to the last
// batch; the price is a slow destination slows the data path. A file or a
// buffered pipe is the intended destination.
//
// The first error writing to the destination stops the capture: it is
// kept (Err, Close) and later packets are not recorded, so a full disk or
// a closed pipe never breaks the tunnel. The memory a Writer holds is its
// fixed buffer.
type Writer struct {
	now func() time.Time

	mu     sync.Mutex // guards the fields below
	bw     *bufio.Writer
	err    error // first write error; once set nothing more is written
	closed bool
	hdr    [recordHeaderLen]byte
}

// NewWriter writes the global header to w and returns a Writer that
// records packets after it. now stamps each record; nil means time.Now.
// The Writer does not close w: its Close only flushes.
func NewWriter(w io.Writer, now func() time.Time) (*Writer, error) {
	if w == nil {
		return nil, errors.New("pcap: nil destination")
	}
	if now == nil {
		now = time.Now
	}
	pw := &Writer{now: now, bw: bufio.NewWriterSize(w, bufSize)}
	var h [globalHeaderLen]byte
	le := binary.LittleEndian
	le.PutUint32(h[0:], magicNano)
	le.PutUint16(h[4:], 2) // version 2.4, the only one readers know
	le.PutUint16(h[6:], 4)
	// thiszone and sigfigs stay 0: timestamps are UTC.
	le.PutUint32(h[16:], snapLen)
	le.PutUint32(h[20:], linkTypeRaw)
	pw.bw.Write(h[:])
	if err := pw.bw.Flush(); err != nil {
		return nil, fmt.Errorf("pcap: writing the file header: %w", err)
	}
	return pw, nil
}

// writeBatch records the packets bufs[i][offset:offset+sizes[i]] (the
// whole of bufs[i][offset:] when sizes is nil) under one timestamp, the
// moment the batch passed, and flushes once. Sizes that do not fit their
// buffer are cut to it: a capture never panics on a buggy Device.
func (w *Writer) writeBatch(bufs [][]byte, sizes []int, offset int) {
	if len(bufs) == 0 || offset < 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped() {
		return
	}
	ts := stamp(w.now())
	for i, b := range bufs {
		if offset > len(b) {
			continue
		}
		pkt := b[offset:]
		if sizes != nil {
			if i >= len(sizes) {
				break
			}
			if n := sizes[i]; n >= 0 && n < len(pkt) {
				pkt = pkt[:n]
			}
		}
		w.record(ts, pkt)
	}
	w.flush()
}

// timestamp is a record's time: seconds and nanoseconds since the epoch.
type timestamp struct{ sec, nsec uint32 }

// stamp converts t; times outside what 32-bit seconds hold are clamped,
// since a record header cannot say them.
func stamp(t time.Time) timestamp {
	s := t.Unix()
	switch {
	case s < 0:
		return timestamp{}
	case s > 1<<32-1:
		return timestamp{sec: 1<<32 - 1, nsec: 999999999}
	}
	return timestamp{sec: uint32(s), nsec: uint32(t.Nanosecond())}
}

// record buffers one record. Called with mu held.
func (w *Writer) record(ts timestamp, pkt []byte) {
	incl := min(len(pkt), snapLen)
	le := binary.LittleEndian
	le.PutUint32(w.hdr[0:], ts.sec)
	le.PutUint32(w.hdr[4:], ts.nsec)
	le.PutUint32(w.hdr[8:], uint32(incl))
	le.PutUint32(w.hdr[12:], uint32(len(pkt)))
	if _, err := w.bw.Write(w.hdr[:]); err != nil {
		w.fail(err)
		return
	}
	if _, err := w.bw.Write(pkt[:incl]); err != nil {
		w.fail(err)
	}
}

// flush pushes the buffered records to the destination. Called with mu
// held.
func (w *Writer) flush() {
	if w.err == nil {
		if err := w.bw.Flush(); err != nil {
			w.fail(err)
		}
	}
}

// fail keeps the first error. Called with mu held.
func (w *Writer) fail(err error) {
	if w.err == nil {
		w.err = fmt.Errorf("pcap: capture stopped: %w", err)
	}
}

// stopped reports whether records are no longer written. Called with mu
// held.
func (w *Writer) stopped() bool { return w.err != nil || w.closed }

// Err returns the error that stopped the capture, or nil.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Close flushes what is buffered and stops recording; packets after it are
// not recorded. It returns the error that stopped the capture, if one did.
// Closing twice is not an error. The destination stays open: it is the
// caller's.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.flush()
		w.closed = true
	}
	return w.err
}
