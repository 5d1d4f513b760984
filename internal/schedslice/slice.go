// Package schedslice asks the kernel's fair scheduler for a short time
// slice on every thread of the process. Under EEVDF (Linux 6.6 and later;
// custom slices since 6.12) a shorter slice gives a thread an earlier
// virtual deadline when it wakes, so a tunnel thread woken by a packet runs
// before a bulk process on the same CPU has used up its slice. That is
// lower latency, not more CPU: the thread's weight, its share of the CPU,
// stays as it was. No privilege is needed, and the nice value is kept.
package schedslice

import (
	"fmt"
	"time"
)

// The range the kernel accepts (it clamps to it).
const (
	Min = 100 * time.Microsecond
	Max = 100 * time.Millisecond
)

// Parse reads a slice setting: "" is def, "off" is 0 (leave the
// scheduler's default alone), anything else a duration from Min to Max.
func Parse(s string, def time.Duration) (time.Duration, error) {
	switch s {
	case "":
		return def, nil
	case "off":
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < Min || d > Max {
		return 0, fmt.Errorf("%q: want a duration from %v to %v, or off", s, Min, Max)
	}
	return d, nil
}
