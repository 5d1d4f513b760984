package leakcheck

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a testing.TB whose cleanups and errors the test runs and
// reads itself.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
	errs     []string
}

func (r *recorder) Helper()          {}
func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) finish() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

func leaky(stop <-chan struct{}) { <-stop }

func TestCheckReportsALeak(t *testing.T) {
	r := &recorder{TB: t}
	check(r, 50*time.Millisecond)
	stop := make(chan struct{})
	defer close(stop)
	go leaky(stop)
	r.finish()
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "leakcheck.leaky") {
		t.Fatalf("errors %q, want one naming the leaked goroutine", r.errs)
	}
}

func TestCheckWaitsForStragglers(t *testing.T) {
	r := &recorder{TB: t}
	check(r, 5*time.Second)
	stop := make(chan struct{})
	go leaky(stop)
	time.AfterFunc(30*time.Millisecond, func() { close(stop) })
	r.finish()
	if len(r.errs) != 0 {
		t.Fatalf("a goroutine that ended during the wait was reported: %q", r.errs)
	}
}
