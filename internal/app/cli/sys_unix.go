//go:build unix

package cli

import (
	"io/fs"
	"os"
	"syscall"
	"time"
)

// forwardedSignals are passed on to the command instead of stopping us:
// the tunnel lives as long as the command does.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH}

// cpuAll is the CPU time of this process and its waited-for children.
func cpuAll() time.Duration {
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return total
}

// daemonAttr starts the daemon child in a session of its own, so that it
// outlives the terminal the parent ran in.
func daemonAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// fileOwner is the uid that owns fi's file.
func fileOwner(fi fs.FileInfo) (uid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
