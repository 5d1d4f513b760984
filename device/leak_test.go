package device

import (
	"strings"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/leakcheck"
)

// checkGoroutines fails t if goroutines that started during t are still
// running once its cleanups have run (devices closed). Call it before
// creating any device: t.Cleanup runs last-registered first, so the check
// comes after every Close. Goroutines that existed before the call are not
// ours to judge, and teardown is asynchronous, so the check waits a little
// for stragglers before failing.
func checkGoroutines(t testing.TB) {
	t.Helper()
	before := make(map[string]bool)
	for _, g := range goroutines() {
		before[g.id] = true
	}
	t.Cleanup(func() {
		var leaked []goroutine
		for deadline := time.Now().Add(5 * time.Second); ; {
			leaked = leaked[:0]
			for _, g := range goroutines() {
				if !before[g.id] && !ignoredGoroutine(g.stack) {
					leaked = append(leaked, g)
				}
			}
			if len(leaked) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		for _, g := range leaked {
			t.Errorf("goroutine outlived the test:\n%s", g.stack)
		}
	})
}

type goroutine struct {
	id    string // "goroutine 123"
	stack string
}

// goroutines parses runtime.Stack's dump of every goroutine: blocks that
// start with "goroutine N [state]:" separated by blank lines.
func goroutines() []goroutine {
	var out []goroutine
	for _, s := range leakcheck.Stacks() {
		head, _, _ := strings.Cut(s, " [")
		if strings.HasPrefix(head, "goroutine ") {
			out = append(out, goroutine{id: head, stack: s})
		}
	}
	return out
}

// ignoredGoroutine names goroutines the runtime or the testing package
// start lazily, which belong to no test.
func ignoredGoroutine(stack string) bool {
	for _, s := range []string{
		"testing.(*T).Run(",
		"testing.(*M).",
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
