package interop

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/leakcheck"
)

// leakWait bounds how long goroutines get to finish after the nodes close.
const leakWait = 10 * time.Second

// ourGoroutines returns the stacks of goroutines running fips-go code
// (product packages or this package's helpers), apart from the test and
// benchmark runners of package testing.
func ourGoroutines() []string {
	var ours []string
	for _, s := range leakcheck.Stacks() {
		runner := strings.Contains(s, "testing.tRunner") || strings.Contains(s, "\ncreated by testing.")
		if strings.Contains(s, "github.com/fips-go/fips-go/") && !runner {
			ours = append(ours, s)
		}
	}
	return ours
}

// checkNoLeaks makes the test fail if goroutines it started outlive it:
// it waits (bounded) until no fips-go goroutine is left and the goroutine
// count is back where it was, which also catches gVisor goroutines of a
// stack that was not torn down. wireguard-go cleans up after itself, so
// the count check holds in the interop tests too. Call it first in a test,
// so its cleanup runs after the nodes' (cleanups run last-in first-out).
func checkNoLeaks(t testing.TB) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(leakWait)
		for {
			ours, n := ourGoroutines(), runtime.NumGoroutine()
			if len(ours) == 0 && n <= before {
				return
			}
			if time.Now().After(deadline) {
				if len(ours) > 0 {
					t.Errorf("%d fips-go goroutines still running after Close:\n%s", len(ours), strings.Join(ours, "\n\n"))
					return
				}
				buf := make([]byte, 1<<20)
				t.Errorf("%d goroutines before the test, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}
