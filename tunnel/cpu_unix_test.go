//go:build unix

package tunnel_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) the process has used: both
// tunnels, sender and receiver, since the benchmark runs them all.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
