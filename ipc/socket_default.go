//go:build !linux

package ipc

import (
	"os"
	"time"
)

// pollInterval is how often the socket file is checked where there is no
// inotify: quick enough for a daemon to exit soon after `rm`, cheap enough
// to be noise.
const pollInterval = 500 * time.Millisecond

// watchRemoval closes removed once path stops naming the socket ident,
// checking with Lstat every pollInterval.
func watchRemoval(path string, ident os.FileInfo, removed chan struct{}) (stop func(), err error) {
	done := make(chan struct{})
	var g removalGuard
	go func() {
		t := time.NewTicker(pollInterval)
		defer t.Stop()
		for !g.check(path, ident, removed) {
			select {
			case <-t.C:
			case <-done:
				return
			}
		}
	}()
	return func() {
		g.stop()
		close(done)
	}, nil
}
