package procs

import (
	"testing"
	"time"
)

func sample(busyCPUs, idleCPUs float64) Sample {
	wall := 500 * time.Millisecond
	return Sample{Wall: wall, Busy: time.Duration(busyCPUs * float64(wall)), Idle: idleCPUs}
}

func TestControllerDecisions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		max     int
		cur     int
		samples []Sample
		want    []int
	}{
		{"saturated machine, top P unused: lower after two intervals",
			2, 2, []Sample{sample(0.8, 0.1), sample(0.8, 0.1), sample(0.8, 0.1)}, []int{2, 1, 1}},
		{"one interval of spare in between restarts the count",
			2, 2, []Sample{sample(0.8, 0.1), sample(0.8, 0.3), sample(0.8, 0.1), sample(0.8, 0.1)}, []int{2, 2, 2, 1}},
		{"spare CPU and a busy top P raise at once, one P per idle CPU, up to max",
			8, 1, []Sample{sample(0.6, 0.6), sample(1.6, 1.4), sample(2.9, 2.6), sample(5.5, 3.5)}, []int{2, 3, 6, 8}},
		{"an idle process gets no Ps back",
			4, 1, []Sample{sample(0.3, 3.5), sample(0, 4), sample(0.49, 3)}, []int{1, 1, 1}},
		{"a process that uses its Ps keeps them on a saturated machine",
			2, 2, []Sample{sample(1.9, 0), sample(1.9, 0), sample(1.3, 0.1)}, []int{2, 2, 2}},
		{"top P used a quarter: the boundary keeps it",
			2, 2, []Sample{sample(1.25, 0), sample(1.25, 0)}, []int{2, 2}},
		{"never below one",
			2, 1, []Sample{sample(0, 0), sample(0, 0), sample(0, 0)}, []int{1, 1, 1}},
		{"idle between the thresholds holds",
			4, 3, []Sample{sample(2.5, 0.4), sample(1.5, 0.4), sample(0.5, 0.4)}, []int{3, 3, 3}},
		{"the top P half busy with a CPU to spare raises; less than half does not",
			4, 2, []Sample{sample(1.49, 1), sample(1.5, 1)}, []int{2, 3}},
		{"four CPUs, two daemons' worth of load: one P given back, no more",
			4, 4, []Sample{sample(0.9, 0.1), sample(0.9, 0.1), sample(0.9, 0.1), sample(0.9, 0.1), sample(0.9, 0.1), sample(0.9, 0.1), sample(0.9, 0.1)}, []int{4, 3, 3, 3, 3, 3, 3}},
		{"64 CPUs kept busy by others: the daemon keeps 63 Ps however long it lasts",
			64, 64, []Sample{sample(2, 0), sample(2, 0), sample(2, 0), sample(2, 0), sample(2, 0), sample(2, 0)}, []int{64, 63, 63, 63, 63, 63}},
		{"an empty interval changes nothing",
			2, 2, []Sample{{}, sample(0.8, 0.1), {}, sample(0.8, 0.1)}, []int{2, 2, 2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Controller{Max: tc.max, Cur: tc.cur}
			for i, s := range tc.samples {
				if got := c.Next(s); got != tc.want[i] {
					t.Fatalf("sample %d (%+v): got %d, want %d", i, s, got, tc.want[i])
				}
			}
		})
	}
}

// After ParkAfter quiet intervals in a row the controller asks to park;
// one interval of use restarts the count, and so does Resume, which also
// forgets a pending lowering.
func TestControllerParks(t *testing.T) {
	quiet := sample(QuietUsed/2, 1.5)
	c := Controller{Max: 2, Cur: 2}
	for i := range ParkAfter - 1 {
		c.Next(quiet)
		if c.Parked() {
			t.Fatalf("parked after %d quiet intervals", i+1)
		}
	}
	c.Next(sample(QuietUsed, 1.5)) // at the threshold: not quiet
	for range ParkAfter - 1 {
		c.Next(quiet)
	}
	if c.Parked() {
		t.Fatal("parked although an interval in the run was not quiet")
	}
	c.Next(Sample{}) // an empty interval neither counts nor resets
	if c.Parked() {
		t.Fatal("an empty interval counted as quiet")
	}
	if got := c.Next(quiet); got != 2 || !c.Parked() {
		t.Fatalf("after %d quiet intervals: GOMAXPROCS %d, parked %v; want 2, true", ParkAfter, got, c.Parked())
	}
	c.Resume()
	if c.Parked() {
		t.Fatal("still parked after Resume")
	}
	// A quiet process on a saturated machine asks to lower (its top P is
	// unused); Resume forgets the first such interval.
	c.Next(sample(0, 0.1))
	c.Resume()
	if got := c.Next(sample(0, 0.1)); got != 2 {
		t.Fatalf("lowered on the first interval after Resume: %d", got)
	}
	if got := c.Next(sample(0, 0.1)); got != 1 {
		t.Fatalf("did not lower on the second: %d", got)
	}
}

func TestControllerClampsItsState(t *testing.T) {
	c := Controller{Max: 2, Cur: 7}
	if got := c.Next(sample(2, 1)); got != 2 {
		t.Fatalf("Cur above Max: got %d, want 2", got)
	}
	c = Controller{}
	if got := c.Next(sample(2, 1)); got != 1 {
		t.Fatalf("zero Controller: got %d, want 1", got)
	}
}

const statText = `cpu  1000 10 500 8000 200 30 40 20 300 0
cpu0 500 5 250 4000 100 15 20 10 150 0
cpu1 500 5 250 4000 100 15 20 10 150 0
intr 12345 0 0
ctxt 999
`

func TestParseStat(t *testing.T) {
	idle, all, cpus, err := parseStat([]byte(statText))
	if err != nil {
		t.Fatal(err)
	}
	// guest (300) is inside user already and is not added again.
	if idle != 8200 || all != 9800 || cpus != 2 {
		t.Fatalf("got idle %d all %d cpus %d, want 8200 9800 2", idle, all, cpus)
	}
}

func TestParseStatRejects(t *testing.T) {
	for _, in := range []string{
		"",
		"intr 1 2 3\n",
		"cpu  1 2 3\ncpu0 1 2 3 4\n",
		"cpu  1 2 x 4 5\ncpu0 1 2 3 4 5\n",
		"cpu  1 2 3 4 5 6 7 8\n",
	} {
		if _, _, _, err := parseStat([]byte(in)); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

func TestSampleFromCounters(t *testing.T) {
	t0 := time.Unix(100, 0)
	p := counters{wall: t0, busy: time.Second, idle: 1000, all: 2000, cpus: 2}
	n := counters{wall: t0.Add(500 * time.Millisecond), busy: 1400 * time.Millisecond, idle: 1025, all: 2100, cpus: 2}
	s := n.since(p)
	if s.Wall != 500*time.Millisecond || s.Busy != 400*time.Millisecond || s.Idle != 0.5 {
		t.Fatalf("got %+v", s)
	}
	// Counters that went backwards (a CPU taken offline) give no idle
	// rather than a huge one.
	n.idle = 900
	if s := n.since(p); s.Idle != 0 {
		t.Fatalf("idle counter went back: Idle %v", s.Idle)
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte(statText))
	f.Add([]byte("cpu 1 2 3 4\ncpu0 1 2 3 4\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		idle, all, cpus, err := parseStat(b)
		if err == nil && (cpus < 1 || idle > all) {
			t.Fatalf("accepted %q: idle %d all %d cpus %d", b, idle, all, cpus)
		}
	})
}
