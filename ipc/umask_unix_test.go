//go:build unix

package ipc_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/fips-go/fips-go/ipc"
)

// TestListenModeIgnoresUmask: even with umask 0, which would leave a plain
// bind world-writable for a moment, the socket is 0600 by the time it has
// its public name. The directory Listen creates is 0755.
func TestListenModeIgnoresUmask(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(shortDir(t), "wireguard")
	l, err := ipc.Listen(dir, "wg0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fi, err := os.Lstat(filepath.Join(dir, "wg0.sock"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	if di, err := os.Stat(dir); err != nil || di.Mode().Perm() != 0o755 {
		t.Fatalf("directory mode %v, %v; want 0755", di.Mode(), err)
	}
}
