package schedslice

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// slices reads every thread's slice and nice value.
func slices(t *testing.T) map[int][2]int64 {
	t.Helper()
	tids, err := threads()
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][2]int64{}
	for _, tid := range tids {
		a, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // gone
		}
		out[tid] = [2]int64{int64(a.Runtime), int64(a.Nice)}
	}
	return out
}

// customSlices reports whether the running kernel is 6.12 or later.
func customSlices(t *testing.T) bool {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var major, minor int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor); err != nil {
		t.Fatalf("kernel release %q: %v", u.Release, err)
	}
	return major > 6 || major == 6 && minor >= 12
}

// TestApplySetsEveryThreadAndNewOnes checks that every thread has the
// slice after Apply, that threads started later inherit it, that the nice
// values stay, and that 0 brings back the default.
func TestApplySetsEveryThreadAndNewOnes(t *testing.T) {
	before := slices(t)
	var def int64
	for _, v := range before {
		def = v[0]
	}
	want := 200 * time.Microsecond
	if _, err := Apply(want); err != nil {
		t.Fatal(err)
	}
	defer Apply(0)
	if !customSlices(t) {
		t.Skip("custom slices need Linux 6.12 or later")
	}
	// New threads: more goroutines holding an OS thread each at once than
	// the process had threads, so the runtime must start some.
	var started, release sync.WaitGroup
	release.Add(1)
	for range len(before) + 2 {
		started.Add(1)
		go func() {
			runtime.LockOSThread()
			started.Done()
			release.Wait()
		}()
	}
	started.Wait()
	now := slices(t)
	release.Done()
	if len(now) <= len(before) {
		t.Fatalf("no new threads appeared (%d before, %d now)", len(before), len(now))
	}
	for tid, v := range now {
		if v[0] != int64(want) {
			t.Errorf("thread %d: slice %d ns, want %d", tid, v[0], want)
		}
		if b, ok := before[tid]; ok && b[1] != v[1] {
			t.Errorf("thread %d: nice %d became %d", tid, b[1], v[1])
		}
	}
	if _, err := Apply(0); err != nil {
		t.Fatal(err)
	}
	for tid, v := range slices(t) {
		if v[0] != def {
			t.Errorf("thread %d: slice %d ns after reset, want the default %d", tid, v[0], def)
		}
	}
}
