package schedslice

import (
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Apply sets slice on every thread of the process whose policy is
// SCHED_OTHER or SCHED_BATCH, keeping its nice value; 0 returns them to
// the scheduler's default. Threads created later inherit it from the
// thread that creates them (and so would a program the process started),
// so Apply repeats until a pass finds no thread it has not set. It returns
// how many threads it saw. The kernel clamps the slice to Min-Max; kernels
// without custom slices take the call and ignore the slice.
func Apply(slice time.Duration) (int, error) {
	done := map[int]bool{}
	for pass := 0; pass < 8; pass++ {
		tids, err := threads()
		if err != nil {
			return len(done), err
		}
		fresh := 0
		for _, tid := range tids {
			if done[tid] {
				continue
			}
			fresh++
			done[tid] = true
			if err := set(tid, slice); err != nil && err != unix.ESRCH {
				return len(done), err
			}
		}
		if fresh == 0 {
			break
		}
	}
	return len(done), nil
}

func set(tid int, slice time.Duration) error {
	a, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return err
	}
	if a.Policy != unix.SCHED_NORMAL && a.Policy != unix.SCHED_BATCH {
		return nil
	}
	a.Runtime = uint64(slice)
	a.Flags &= unix.SCHED_FLAG_RESET_ON_FORK
	return unix.SchedSetAttr(tid, a, 0)
}

func threads() ([]int, error) {
	d, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	tids := make([]int, 0, len(d))
	for _, e := range d {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}
