package privsep

import (
	"errors"
	"fmt"
)

// The worker's user: one of the uids systemd sets aside for dynamic
// users (DynamicUser=, 61184 to 65519), which no package and no
// administrator hands out. Each interface's worker gets a uid no running
// process has, so that two daemons cannot signal, trace or read each
// other (nobody, shared by every daemon that uses it and by NFS, would
// not do).
const (
	FirstUID = 61184
	LastUID  = 65519
)

// ErrNoUID says every uid of the range is taken.
var ErrNoUID = errors.New("privsep: no free uid for the worker")

// PickUID returns the first uid of [FirstUID, LastUID], starting at
// FirstUID + seed modulo the range's size and wrapping around, for which
// taken is false. A seed that differs between daemons (the monitor's pid)
// keeps two that start at once from trying the same uid first.
func PickUID(seed int, taken func(uid int) bool) (int, error) {
	const n = LastUID - FirstUID + 1
	start := seed % n
	if start < 0 {
		start += n
	}
	for i := range n {
		uid := FirstUID + (start+i)%n
		if !taken(uid) {
			return uid, nil
		}
	}
	return 0, fmt.Errorf("%w in %d..%d", ErrNoUID, FirstUID, LastUID)
}
