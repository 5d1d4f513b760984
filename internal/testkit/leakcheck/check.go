package leakcheck

import (
	"strings"
	"testing"
	"time"
)

// Wait bounds how long Check gives goroutines to finish after the test's
// cleanups: teardown is asynchronous (a closed socket wakes its reader
// later), and a loaded machine makes it slower still.
const Wait = 10 * time.Second

// Check fails t if goroutines that started during t are still running
// once its cleanups have run. Call it first in a test, before anything
// that registers a cleanup (t.Cleanup runs last-registered first, so the
// check then comes after every Close). Goroutines that existed before the
// call are not t's to judge, nor are those the runtime and the testing
// package start lazily. It waits up to Wait for stragglers before failing,
// and prints the stack of each one left.
func Check(t testing.TB) {
	t.Helper()
	check(t, Wait)
}

func check(t testing.TB, wait time.Duration) {
	before := make(map[string]bool)
	for _, s := range Stacks() {
		if id, ok := goroutineID(s); ok {
			before[id] = true
		}
	}
	t.Cleanup(func() {
		var leaked []string
		for deadline := time.Now().Add(wait); ; {
			leaked = leaked[:0]
			for _, s := range Stacks() {
				if id, ok := goroutineID(s); ok && !before[id] && !ignored(s) {
					leaked = append(leaked, s)
				}
			}
			if len(leaked) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		for _, s := range leaked {
			t.Errorf("goroutine outlived the test:\n%s", s)
		}
	})
}

// goroutineID is "goroutine N" from a stack block's first line.
func goroutineID(stack string) (string, bool) {
	head, _, _ := strings.Cut(stack, " [")
	return head, strings.HasPrefix(head, "goroutine ")
}

// ignored names goroutines the runtime or the testing package start
// lazily, which belong to no test.
func ignored(stack string) bool {
	for _, s := range []string{
		"testing.(*T).Run(",
		"testing.(*B).run",
		"testing.(*B).doBench",
		"testing.(*M).",
		"testing.tRunner(",
		"os/signal.",
		"runtime.ensureSigM",
		"testing.runFuzzing",
	} {
		if strings.Contains(stack, s) {
			return true
		}
	}
	return false
}
