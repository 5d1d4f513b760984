package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// errUnsafeSocketDir says the UAPI socket directory could be reached by
// another local user. Whoever controls that directory can put their own
// socket in place of ours and read every `set` request, private keys
// included, so it is refused rather than repaired.
var errUnsafeSocketDir = errors.New("unsafe socket directory")

// privateSocketDir makes dir (mode 0700) if it is missing and checks that it
// is a real directory, owned by uid, that no one else can write to. The
// default /tmp/fips-go-UID is a predictable name in a shared directory:
// another user may have created it, or a symlink by that name, first.
// os.Mkdir does not follow a symlink in the last component (it fails with
// "exists"), and Lstat then sees the link itself.
func privateSocketDir(dir string, uid int) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("socket directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	return checkPrivateDir(dir, fi, uid)
}

// checkPrivateDir is the pure half of privateSocketDir.
func checkPrivateDir(dir string, fi fs.FileInfo, uid int) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%w: %s is a symlink", errUnsafeSocketDir, dir)
	case !fi.IsDir():
		return fmt.Errorf("%w: %s is not a directory", errUnsafeSocketDir, dir)
	}
	owner, ok := fileOwner(fi)
	if !ok {
		return fmt.Errorf("%w: %s: cannot tell who owns it", errUnsafeSocketDir, dir)
	}
	if owner != uid {
		return fmt.Errorf("%w: %s is owned by uid %d, not %d (remove it, or pick another with --socket-dir)",
			errUnsafeSocketDir, dir, owner, uid)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%w: %s is writable by group or others (mode %#o); chmod 700 it",
			errUnsafeSocketDir, dir, perm)
	}
	return nil
}
