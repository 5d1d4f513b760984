package replay

import (
	"encoding/binary"
	"testing"

	"github.com/fips-go/fips-go/device/noise"
)

type step struct {
	counter uint64
	want    bool
}

func runSteps(t *testing.T, w *Window, steps []step) {
	t.Helper()
	for i, s := range steps {
		if got := w.Accept(s.counter); got != s.want {
			t.Fatalf("step %d: Accept(%d) = %v, want %v", i, s.counter, got, s.want)
		}
	}
}

func TestAcceptTable(t *testing.T) {
	const W = WindowSize
	last := noise.RejectAfterMessages - 1
	tests := []struct {
		name  string
		steps []step
	}{
		{"zero value accepts 0 once", []step{{0, true}, {0, false}}},
		{"in order", []step{{0, true}, {1, true}, {2, true}, {3, true}, {2, false}}},
		{"first counter need not be 0", []step{{5, true}, {0, true}, {5, false}, {0, false}}},
		{"reorder inside window", []step{
			{10, true}, {7, true}, {9, true}, {8, true}, {7, false}, {11, true}, {8, false}, {10, false},
		}},
		{"exactly window size behind is kept", []step{
			{W, true}, {0, true}, {0, false}, {W, false},
		}},
		{"one past window size is too old", []step{
			{W + 1, true}, {0, false}, {1, true}, {1, false},
		}},
		{"boundary moves with highest", []step{
			{W, true}, {W + 1, true}, {0, false}, {1, true},
		}},
		{"huge jump forgets everything", []step{
			{1, true}, {2, true}, {1 << 40, true}, {2, false}, {1<<40 - W, true}, {1<<40 - W - 1, false},
			{1<<40 - 1, true}, {1 << 40, false},
		}},
		{"jump of exactly the ring clears stale bits", []step{
			// A counter one ring length ahead lands in the same word and
			// bit; it must not look like a duplicate.
			{3, true}, {3 + ringWords*wordBits, true}, {3 + ringWords*wordBits, false},
		}},
		{"reject limit", []step{
			{noise.RejectAfterMessages, false}, {^uint64(0), false},
			{last, true}, {last, false}, {last - W, true}, {last - W - 1, false},
			{noise.RejectAfterMessages, false},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var w Window
			runSteps(t, &w, tc.steps)
		})
	}
}

// TestRingWrap walks the highest counter around the ring several times with
// a reordered stream and checks that every counter is accepted exactly once.
func TestRingWrap(t *testing.T) {
	var w Window
	const n = ringWords * wordBits * 5
	var highest uint64
	// Deliver in groups of 97, each group reversed: heavy local reordering.
	for base := uint64(0); base < n; base += 97 {
		for i := 96; i >= 0; i-- {
			c := base + uint64(i)
			if !w.Accept(c) {
				t.Fatalf("fresh counter %d rejected", c)
			}
			highest = max(highest, c)
		}
	}
	for c := highest - WindowSize; c <= highest; c++ {
		if w.Accept(c) {
			t.Fatalf("duplicate %d accepted after wrap", c)
		}
	}
	if w.Accept(highest - WindowSize - 1) {
		t.Fatal("counter behind the window accepted")
	}
}

func TestReset(t *testing.T) {
	var w Window
	runSteps(t, &w, []step{{0, true}, {1 << 30, true}, {0, false}})
	w.Reset()
	runSteps(t, &w, []step{{0, true}, {1 << 30, true}, {5, false}})
}

func TestAcceptAllocs(t *testing.T) {
	var w Window
	var c uint64
	allocs := testing.AllocsPerRun(1000, func() {
		w.Accept(c)
		w.Accept(c + 3000)
		c += 7
	})
	if allocs != 0 {
		t.Fatalf("Accept allocates %v times per run", allocs)
	}
}

// reference is the obvious model: a set of every counter ever accepted and
// the highest one. It is unbounded, so it is only usable for short runs.
type reference struct {
	seen    map[uint64]bool
	highest uint64
}

func (r *reference) accept(c uint64) bool {
	if c >= noise.RejectAfterMessages || r.seen[c] {
		return false
	}
	if c < r.highest && r.highest-c > WindowSize {
		return false
	}
	r.seen[c] = true
	r.highest = max(r.highest, c)
	return true
}

// nextCounter turns 3 bytes of fuzz input into a counter near the current
// highest (the interesting region), occasionally far ahead or at the limit.
func nextCounter(b []byte, highest uint64) uint64 {
	op, delta := b[0], uint64(binary.LittleEndian.Uint16(b[1:]))
	switch op % 8 {
	case 0, 1, 2: // behind, within or just outside the window
		if delta > highest {
			return 0
		}
		return highest - delta
	case 3, 4: // slightly ahead
		return highest + delta%200
	case 5: // a large jump, sometimes past the whole ring
		return highest + delta*uint64(op)
	case 6: // near the reject limit
		return noise.RejectAfterMessages - 1 - delta%3 + uint64(op>>7)*2
	default: // the window edge exactly, or one past it
		return highest - min(highest, WindowSize+uint64(op>>7))
	}
}

func FuzzWindow(f *testing.F) {
	f.Add([]byte{0, 0, 0, 3, 5, 0, 0, 1, 0})
	f.Add([]byte{5, 255, 255, 0, 0, 32, 7, 0, 0, 7, 0, 0, 7, 128, 0})
	f.Add([]byte{6, 0, 0, 6, 1, 0, 0, 0, 32, 0, 1, 32, 7, 128, 128})
	f.Fuzz(func(t *testing.T, data []byte) {
		var w Window
		ref := reference{seen: make(map[uint64]bool)}
		for i := 0; i+3 <= len(data) && i < 3*4096; i += 3 {
			c := nextCounter(data[i:i+3], ref.highest)
			want := ref.accept(c)
			if got := w.Accept(c); got != want {
				t.Fatalf("op %d: Accept(%d) = %v, reference %v (highest %d)", i/3, c, got, want, ref.highest)
			}
		}
	})
}

func BenchmarkAccept(b *testing.B) {
	b.Run("in-order", func(b *testing.B) {
		var w Window
		b.ReportAllocs()
		for i := range b.N {
			w.Accept(uint64(i))
		}
	})
	b.Run("reordered", func(b *testing.B) {
		// Swap neighbours in groups of 8 and replay every 16th counter:
		// roughly what parallel decryption workers produce.
		var w Window
		b.ReportAllocs()
		for i := range b.N {
			c := uint64(i) ^ 7
			w.Accept(c)
			if i%16 == 0 {
				w.Accept(c)
			}
		}
	})
}
