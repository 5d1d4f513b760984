package cli

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestPrivateSocketDirCreates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "fips-go-1000")
	if err := privateSocketDir(dir, os.Getuid()); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v, want a 0700 directory", fi.Mode())
	}
	// A second run finds its own directory and accepts it.
	if err := privateSocketDir(dir, os.Getuid()); err != nil {
		t.Fatal(err)
	}
}

func TestPrivateSocketDirRefuses(t *testing.T) {
	uid := os.Getuid()
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
		uid   int
	}{
		{"someone else's uid", func(t *testing.T, dir string) { mkdir(t, dir, 0o700) }, uid + 1},
		{"group writable", func(t *testing.T, dir string) { mkdir(t, dir, 0o770) }, uid},
		{"other writable", func(t *testing.T, dir string) { mkdir(t, dir, 0o1777) }, uid},
		{"a file", func(t *testing.T, dir string) {
			if err := os.WriteFile(dir, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, uid},
		{"symlink to own private dir", func(t *testing.T, dir string) {
			target := dir + ".target"
			mkdir(t, target, 0o700)
			symlink(t, target, dir)
		}, uid},
		{"owned by uid 65534", func(t *testing.T, dir string) {
			if uid != 0 {
				t.Skip("needs root to chown")
			}
			mkdir(t, dir, 0o700)
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, uid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "fips-go-1000")
			c.setup(t, dir)
			err := privateSocketDir(dir, c.uid)
			if !errors.Is(err, errUnsafeSocketDir) {
				t.Fatalf("got %v, want %v", err, errUnsafeSocketDir)
			}
		})
	}
}

// A dangling symlink planted at the name must not lead Mkdir to create the
// directory wherever it points.
func TestPrivateSocketDirDanglingSymlink(t *testing.T) {
	base := t.TempDir()
	dir, target := filepath.Join(base, "fips-go-1000"), filepath.Join(base, "elsewhere")
	symlink(t, target, dir)
	if err := privateSocketDir(dir, os.Getuid()); !errors.Is(err, errUnsafeSocketDir) {
		t.Fatalf("got %v, want %v", err, errUnsafeSocketDir)
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("symlink target was created (%v)", err)
	}
}

func mkdir(t *testing.T, dir string, perm os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, perm); err != nil { // Mkdir's mode is cut by the umask
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
