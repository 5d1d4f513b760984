//go:build unix

package proxy

import (
	"fmt"
	"os"
	"syscall"
)

// checkOwner refuses a file that another user owns: its owner could
// change its mode or its contents.
func checkOwner(path string, fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: cannot tell its owner", path)
	}
	if euid := os.Geteuid(); int(st.Uid) != euid {
		return fmt.Errorf("%s: owned by uid %d, not by this user (uid %d)", path, st.Uid, euid)
	}
	return nil
}
