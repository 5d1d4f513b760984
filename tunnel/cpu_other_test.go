//go:build !unix

package tunnel_test

import "time"

// processCPU is not measured here; the benchmark's CPU-s/GB reads 0.
func processCPU() time.Duration { return 0 }
