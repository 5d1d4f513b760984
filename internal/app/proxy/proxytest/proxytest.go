// Package proxytest holds what the tests of the proxies share: a log that
// records lines, and a dialer that fails the way a bug would.
package proxytest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
)

// Log records what a server logs, for a test to count.
type Log struct {
	mu    sync.Mutex
	lines []string
}

// Logf records one line; it is a server's Options.Logf.
func (l *Log) Logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

// Count is how many lines contain s.
func (l *Log) Count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// PanicOnceDial dials TCP on the loopback as a tunnel would, except that
// its first call panics.
func PanicOnceDial() func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
	var calls atomic.Int32
	return func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
		if calls.Add(1) == 1 {
			panic("a bug in a Dial")
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", ap.String())
	}
}
