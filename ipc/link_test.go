package ipc_test

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/fips-go/fips-go/ipc"
)

// A second name for the socket (awg(8)'s directory) reaches the same
// listener, is kept when asked again, and goes with Close.
func TestListenerLink(t *testing.T) {
	dir, awgDir := t.TempDir(), filepath.Join(t.TempDir(), "amneziawg")
	l, err := ipc.Listen(dir, "lnk0")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Link(awgDir); err != nil {
		t.Fatal(err)
	}
	if err := l.Link(awgDir); err != nil { // the daemon's child asks again
		t.Fatalf("linking again: %v", err)
	}
	link := filepath.Join(awgDir, "lnk0.sock")
	c, err := net.Dial("unix", link)
	if err != nil {
		t.Fatalf("dialing the second name: %v", err)
	}
	c.Close()
	if fi, err := os.Stat(link); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("second name: %v, mode %v", err, fi.Mode())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{l.Path(), link} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after Close: %v, want it gone", p, err)
		}
	}
}

// A live socket of another process under the second name is left alone.
func TestListenerLinkInUse(t *testing.T) {
	dir, awgDir := t.TempDir(), t.TempDir()
	other, err := ipc.Listen(awgDir, "lnk1")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	l, err := ipc.Listen(dir, "lnk1")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Link(awgDir); !errors.Is(err, ipc.ErrInUse) {
		t.Fatalf("linking over a live socket: %v, want ErrInUse", err)
	}
}
