package pcap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"
)

// capture is a pcap file as the test reads it back.
type capture struct {
	magic             uint32
	major, minor      uint16
	snapLen, linkType uint32
	thisZone, sigFigs uint32
	records           []rec
}

type rec struct {
	ts         time.Time
	incl, orig uint32
	data       []byte
}

// parse reads a little-endian nanosecond pcap file, failing the test on
// anything short or inconsistent.
func parse(t *testing.T, b []byte) capture {
	t.Helper()
	if len(b) < 24 {
		t.Fatalf("capture of %d bytes has no global header", len(b))
	}
	le := binary.LittleEndian
	c := capture{
		magic: le.Uint32(b[0:]), major: le.Uint16(b[4:]), minor: le.Uint16(b[6:]),
		thisZone: le.Uint32(b[8:]), sigFigs: le.Uint32(b[12:]),
		snapLen: le.Uint32(b[16:]), linkType: le.Uint32(b[20:]),
	}
	for b = b[24:]; len(b) > 0; {
		if len(b) < 16 {
			t.Fatalf("record header cut short: %d bytes left", len(b))
		}
		r := rec{
			ts:   time.Unix(int64(le.Uint32(b[0:])), int64(le.Uint32(b[4:]))),
			incl: le.Uint32(b[8:]), orig: le.Uint32(b[12:]),
		}
		if le.Uint32(b[4:]) >= 1e9 {
			t.Fatalf("record %d: nanoseconds %d out of range", len(c.records), le.Uint32(b[4:]))
		}
		b = b[16:]
		if uint32(len(b)) < r.incl {
			t.Fatalf("record %d: incl_len %d, %d bytes left", len(c.records), r.incl, len(b))
		}
		r.data, b = b[:r.incl], b[r.incl:]
		c.records = append(c.records, r)
	}
	return c
}

// stepClock returns a clock that advances by a millisecond per call, from
// a fixed instant with a nanosecond part, so records tell calls apart.
func stepClock() (now func() time.Time, at func(i int) time.Time) {
	base := time.Unix(1700000000, 123456789)
	var mu sync.Mutex
	n := 0
	now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t := base.Add(time.Duration(n) * time.Millisecond)
		n++
		return t
	}
	return now, func(i int) time.Time { return base.Add(time.Duration(i) * time.Millisecond) }
}

func TestGlobalHeader(t *testing.T) {
	var buf bytes.Buffer
	if _, err := NewWriter(&buf, nil); err != nil {
		t.Fatal(err)
	}
	// A new Writer flushes its header, so an empty capture is a valid file.
	c := parse(t, buf.Bytes())
	if c.magic != 0xa1b23c4d || c.major != 2 || c.minor != 4 || c.thisZone != 0 || c.sigFigs != 0 ||
		c.snapLen != 262144 || c.linkType != 101 || len(c.records) != 0 {
		t.Fatalf("global header %+v", c)
	}
}

func TestRecords(t *testing.T) {
	var buf bytes.Buffer
	now, at := stepClock()
	w, err := NewWriter(&buf, now)
	if err != nil {
		t.Fatal(err)
	}
	const off = 4
	pkts := [][]byte{[]byte("first"), {}, bytes.Repeat([]byte{0xab}, 3000)}
	bufs := make([][]byte, len(pkts))
	sizes := make([]int, len(pkts))
	for i, p := range pkts {
		bufs[i] = append(make([]byte, off, off+len(p)+10), p...)
		bufs[i] = bufs[i][:cap(bufs[i])] // trailing bytes sizes must cut off
		sizes[i] = len(p)
	}
	w.writeBatch(bufs, sizes, off)
	w.writeBatch([][]byte{append(make([]byte, off), "second batch"...)}, nil, off)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	c := parse(t, buf.Bytes())
	want := append(pkts, []byte("second batch"))
	if len(c.records) != len(want) {
		t.Fatalf("%d records, want %d", len(c.records), len(want))
	}
	for i, r := range c.records {
		ts := at(0) // one timestamp per batch
		if i == len(want)-1 {
			ts = at(1)
		}
		if !bytes.Equal(r.data, want[i]) || r.orig != uint32(len(want[i])) || !r.ts.Equal(ts) {
			t.Errorf("record %d: %d/%d bytes at %v, want %d at %v", i, r.incl, r.orig, r.ts, len(want[i]), ts)
		}
	}
}

func TestSnapLenCutsRecord(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, snapLen+100)
	big[snapLen-1] = 7
	w.writeBatch([][]byte{big}, nil, 0)
	r := parse(t, buf.Bytes()).records
	if len(r) != 1 || r[0].incl != snapLen || r[0].orig != snapLen+100 || r[0].data[snapLen-1] != 7 {
		t.Fatalf("records %d, incl/orig %d/%d", len(r), r[0].incl, r[0].orig)
	}
}

func TestStampClamps(t *testing.T) {
	for _, c := range []struct {
		in   time.Time
		want timestamp
	}{
		{time.Unix(5, 6), timestamp{5, 6}},
		{time.Unix(-1, 0), timestamp{}},
		{time.Unix(1<<33, 0), timestamp{1<<32 - 1, 999999999}},
	} {
		if got := stamp(c.in); got != c.want {
			t.Errorf("stamp(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// badBatches are inputs a buggy Device could produce; none may panic.
func TestWriteBatchOddInput(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte("abcdef")
	w.writeBatch([][]byte{b}, []int{100}, 2)  // size past the buffer: cut to it
	w.writeBatch([][]byte{b}, []int{-1}, 2)   // negative size: the whole rest
	w.writeBatch([][]byte{b}, nil, 10)        // offset past the buffer: skipped
	w.writeBatch([][]byte{b, b}, []int{1}, 0) // fewer sizes than buffers: stop
	w.writeBatch([][]byte{b}, nil, -1)        // negative offset: nothing
	var got []string
	for _, r := range parse(t, buf.Bytes()).records {
		got = append(got, string(r.data))
	}
	if want := "[cdef cdef a]"; fmt.Sprint(got) != want {
		t.Fatalf("records %v, want %v", got, want)
	}
}

var errDiskFull = errors.New("disk full")

// failWriter accepts limit bytes, then fails every write.
type failWriter struct {
	mu            sync.Mutex
	limit, failed int // failed counts the writes refused
	buf           bytes.Buffer
}

func (f *failWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.buf.Len()+len(p) > f.limit {
		f.failed++
		return 0, errDiskFull
	}
	return f.buf.Write(p)
}

func TestNewWriterHeaderError(t *testing.T) {
	if _, err := NewWriter(&failWriter{limit: 10}, nil); !errors.Is(err, errDiskFull) {
		t.Fatalf("NewWriter: %v, want %v", err, errDiskFull)
	}
	if _, err := NewWriter(nil, nil); err == nil {
		t.Fatal("NewWriter(nil) succeeded")
	}
}

func TestCloseIdempotentAndStops(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	w.writeBatch([][]byte{[]byte("late")}, nil, 0)
	if n := len(parse(t, buf.Bytes()).records); n != 0 {
		t.Fatalf("%d records after Close", n)
	}
}

func TestWriteBatchAllocatesNothing(t *testing.T) {
	w, err := NewWriter(io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	bufs := [][]byte{make([]byte, 1500), make([]byte, 60)}
	sizes := []int{1400, 40}
	if n := testing.AllocsPerRun(100, func() { w.writeBatch(bufs, sizes, 16) }); n != 0 {
		t.Fatalf("writeBatch allocates %v times", n)
	}
}

func BenchmarkWriteBatch(b *testing.B) {
	w, err := NewWriter(io.Discard, nil)
	if err != nil {
		b.Fatal(err)
	}
	bufs := make([][]byte, 64)
	sizes := make([]int, len(bufs))
	for i := range bufs {
		bufs[i] = make([]byte, 16+1420)
		sizes[i] = 1420
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(bufs) * 1420))
	for b.Loop() {
		w.writeBatch(bufs, sizes, 16)
	}
}
