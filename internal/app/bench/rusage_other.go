//go:build !unix

package bench

import "time"

// Where getrusage does not exist, the CPU and memory columns read zero.
func CPUTime() time.Duration { return 0 }

func maxRSSKB() int64 { return 0 }
