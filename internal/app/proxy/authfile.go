package proxy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxAuthFile bounds what ReadAuthFile reads: a user name and a password
// of 255 bytes each (RFC 1929), a colon and a line ending fit well inside.
const maxAuthFile = 1024

// ParseAuth splits USER:PASS as RFC 1929 allows it: a user name of 1 to
// 255 bytes and a password of at most 255 (it may hold colons).
func ParseAuth(s string) (user, pass string, err error) {
	u, p, ok := strings.Cut(s, ":")
	if !ok || u == "" || len(u) > 255 || len(p) > 255 {
		return "", "", errors.New("want USER:PASS, a user name of 1 to 255 bytes and a password of at most 255")
	}
	return u, p, nil
}

// ReadAuthFile reads USER:PASS from the first and only line of a file that
// only the running user can read or change: a regular file, owned by the
// effective uid, with no permission bits for group or others (0600 or
// stricter). The checks are made on the opened file, so a file swapped
// after the check is not the one read.
func ReadAuthFile(path string) (user, pass string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", "", err
	}
	if err := checkPrivate(path, fi); err != nil {
		return "", "", err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxAuthFile+1))
	if err != nil {
		return "", "", err
	}
	if len(b) > maxAuthFile {
		return "", "", fmt.Errorf("%s: longer than %d bytes; want one line USER:PASS", path, maxAuthFile)
	}
	line := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if strings.ContainsAny(line, "\r\n") {
		return "", "", fmt.Errorf("%s: want one line USER:PASS", path)
	}
	if user, pass, err = ParseAuth(line); err != nil {
		return "", "", fmt.Errorf("%s: %w", path, err)
	}
	return user, pass, nil
}

// checkPrivate refuses a file that is not regular or that others could
// read or write.
func checkPrivate(path string, fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s: mode %04o lets other users read or change it; want 0600 or stricter (chmod 600 %s)", path, perm, path)
	}
	return checkOwner(path, fi)
}

// AuthFromFlags is the SOCKS5 credentials the command line names: inline
// USER:PASS (flag --socks5-auth), or the path of a private file holding it
// (--socks5-auth-file), or neither. It returns USER:PASS ("" for none)
// and, for the inline form, a warning to show the user: every local user
// can read a process's arguments in /proc/PID/cmdline.
func AuthFromFlags(inline, file string) (auth, warning string, err error) {
	switch {
	case inline != "" && file != "":
		return "", "", errors.New("--socks5-auth and --socks5-auth-file: give one, not both")
	case file != "":
		u, p, err := ReadAuthFile(file)
		if err != nil {
			return "", "", fmt.Errorf("--socks5-auth-file: %w", err)
		}
		return u + ":" + p, "", nil
	case inline != "":
		if _, _, err := ParseAuth(inline); err != nil {
			return "", "", fmt.Errorf("--socks5-auth: %w", err)
		}
		return inline, "--socks5-auth puts the password on the command line, where every local user can read it; use --socks5-auth-file", nil
	}
	return "", "", nil
}
