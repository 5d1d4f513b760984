//go:build !unix

package cli

import (
	"io/fs"
	"os"
	"syscall"
	"time"
)

// Outside Unix the client commands and the netstack modes build; the
// interface daemon and the namespace modes have no kernel support there.

var forwardedSignals = []os.Signal{os.Interrupt}

func cpuAll() time.Duration { return 0 }

func daemonAttr() *syscall.SysProcAttr { return nil }

// fileOwner cannot tell, so a socket directory is never taken for private.
func fileOwner(fs.FileInfo) (uid int, ok bool) { return 0, false }
