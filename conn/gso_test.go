package conn

import (
	"testing"
)

// checkPlan verifies every property planGSO promises for bufs.
func checkPlan(t *testing.T, groups []gsoGroup, bufs [][]byte, maxSegs, maxBytes, segLimit int) {
	t.Helper()
	next := 0
	for gi, g := range groups {
		if g.start != next || g.end <= g.start || g.end > len(bufs) {
			t.Fatalf("group %d = %+v does not continue at %d within %d datagrams", gi, g, next, len(bufs))
		}
		next = g.end
		n := g.end - g.start
		if g.seg != len(bufs[g.start]) {
			t.Fatalf("group %d: seg %d, first datagram %d bytes", gi, g.seg, len(bufs[g.start]))
		}
		if n == 1 {
			continue
		}
		if segLimit > 0 && g.seg >= segLimit {
			t.Fatalf("group %d: %d segments of %d bytes, at or above the limit %d", gi, n, g.seg, segLimit)
		}
		if n > maxSegs {
			t.Fatalf("group %d: %d segments > %d", gi, n, maxSegs)
		}
		total := 0
		for i, b := range bufs[g.start:g.end] {
			total += len(b)
			last := i == n-1
			switch {
			case len(b) == 0:
				t.Fatalf("group %d: zero-length datagram in a GSO run", gi)
			case !last && len(b) != g.seg:
				t.Fatalf("group %d: datagram %d is %d bytes, run is %d", gi, i, len(b), g.seg)
			case last && len(b) > g.seg:
				t.Fatalf("group %d: last datagram %d bytes > %d", gi, len(b), g.seg)
			}
		}
		if total > maxBytes {
			t.Fatalf("group %d: %d bytes > %d", gi, total, maxBytes)
		}
	}
	if next != len(bufs) {
		t.Fatalf("groups cover %d of %d datagrams", next, len(bufs))
	}
	// Greedy: no group could have taken the next datagram.
	for gi, g := range groups[:max(len(groups)-1, 0)] {
		n := g.end - g.start
		nxt := len(bufs[g.end])
		total := 0
		for _, b := range bufs[g.start:g.end] {
			total += len(b)
		}
		shortTail := n > 1 && len(bufs[g.end-1]) < g.seg
		limited := segLimit > 0 && g.seg >= segLimit
		if g.seg > 0 && !limited && !shortTail && n < maxSegs && nxt > 0 && nxt <= g.seg && total+nxt <= maxBytes {
			t.Fatalf("group %d %+v stopped before datagram %d (%d bytes) that fits", gi, g, g.end, nxt)
		}
	}
}

func sized(sizes ...int) [][]byte {
	bufs := make([][]byte, len(sizes))
	for i, n := range sizes {
		bufs[i] = make([]byte, n)
	}
	return bufs
}

func repeat(n, size int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = size
	}
	return s
}

func TestPlanGSO(t *testing.T) {
	type grp = gsoGroup
	tests := []struct {
		name     string
		sizes    []int
		segLimit int
		want     []grp
	}{
		{"empty", nil, 0, nil},
		{"one", []int{1420}, 0, []grp{{0, 1, 1420}}},
		{"equal", repeat(5, 1420), 0, []grp{{0, 5, 1420}}},
		{"short tail", []int{1420, 1420, 700}, 0, []grp{{0, 3, 1420}}},
		{"short tail ends run", []int{1420, 700, 700}, 0, []grp{{0, 2, 1420}, {2, 3, 700}}},
		{"longer breaks run", []int{700, 1420, 1420}, 0, []grp{{0, 1, 700}, {1, 3, 1420}}},
		{"zero alone", []int{100, 0, 100, 100}, 0, []grp{{0, 1, 100}, {1, 2, 0}, {2, 4, 100}}},
		{"zeros", []int{0, 0}, 0, []grp{{0, 1, 0}, {1, 2, 0}}},
		{"64 segments", repeat(130, 100), 0, []grp{{0, 64, 100}, {64, 128, 100}, {128, 130, 100}}},
		// 1420 * 46 = 65320 fits in 65487; a 47th would not.
		{"64 KiB", repeat(50, 1420), 0, []grp{{0, 46, 1420}, {46, 50, 1420}}},
		{"huge alone", []int{70000, 70000}, 0, []grp{{0, 1, 70000}, {1, 2, 70000}}},
		// After the kernel refused 2000-byte segments: those and larger go
		// alone, smaller runs still coalesce, also behind a big one.
		{"limit", []int{9000, 9000, 2000, 2000, 1999, 1999, 1999}, 2000,
			[]grp{{0, 1, 9000}, {1, 2, 9000}, {2, 3, 2000}, {3, 4, 2000}, {4, 7, 1999}}},
		{"big after a small run", []int{1420, 1420, 3000}, 2000, []grp{{0, 2, 1420}, {2, 3, 3000}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bufs := sized(tc.sizes...)
			got := planGSO(nil, bufs, GSOMaxSegments, GSOMaxBytes, tc.segLimit)
			checkPlan(t, got, bufs, GSOMaxSegments, GSOMaxBytes, tc.segLimit)
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %+v, want %+v", got, tc.want)
				}
			}
		})
	}
}

func TestPlanGSOWithoutOffload(t *testing.T) {
	bufs := sized(repeat(10, 1420)...)
	got := planGSO(nil, bufs, 1, GSOMaxBytes, 0)
	if len(got) != 10 {
		t.Fatalf("maxSegs 1 gave %d groups for 10 datagrams", len(got))
	}
	checkPlan(t, got, bufs, 1, GSOMaxBytes, 0)
}

func TestPlanGSOAllocs(t *testing.T) {
	bufs := sized(repeat(128, 1420)...)
	groups := make([]gsoGroup, 0, 128)
	if a := testing.AllocsPerRun(100, func() { groups = planGSO(groups[:0], bufs, GSOMaxSegments, GSOMaxBytes, 1500) }); a != 0 {
		t.Fatalf("planGSO allocated %v times per run", a)
	}
}

// FuzzPlanGSO feeds arbitrary size sequences and limits; every plan must
// keep the invariants and be greedy.
func FuzzPlanGSO(f *testing.F) {
	f.Add([]byte{10, 10, 10, 5}, uint8(64), uint16(65487), uint8(0))
	f.Add([]byte{0, 1, 0, 255, 255, 3}, uint8(2), uint16(300), uint8(0))
	f.Add([]byte{200, 200, 200, 200}, uint8(1), uint16(65487), uint8(0))
	f.Add([]byte{200, 200, 100, 100, 99}, uint8(64), uint16(65487), uint8(100))
	f.Fuzz(func(t *testing.T, raw []byte, segs uint8, maxBytes uint16, limit uint8) {
		if len(raw) > 512 {
			raw = raw[:512]
		}
		sizes := make([]int, len(raw))
		for i, r := range raw {
			sizes[i] = int(r) * 7 // up to 1785 bytes, so byte limits bite
		}
		maxSegs := max(int(segs), 1)
		backing := make([]byte, 255*7)
		bufs := make([][]byte, len(sizes))
		for i, n := range sizes {
			bufs[i] = backing[:n]
		}
		segLimit := int(limit) * 7 // 0: no limit
		checkPlan(t, planGSO(nil, bufs, maxSegs, int(maxBytes), segLimit), bufs, maxSegs, int(maxBytes), segLimit)
	})
}
