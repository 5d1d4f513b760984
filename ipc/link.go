package ipc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// AmneziaSocketDir is where amneziawg-tools' awg(8) looks for userspace
// interfaces (wg(8) looks in DefaultSocketDir). The interface daemon gives
// its socket a second name there, so that awg and awg-quick drive it.
const AmneziaSocketDir = "/var/run/amneziawg"

// linkSocket gives the socket at path a second name, dir/IFACE.sock (dir is
// created 0755 if missing), as a hard link: the same socket, the same 0600
// mode. A name that already is this socket is kept; a stale socket is
// replaced; a live one is left alone (ErrInUse). It returns the new name.
func linkSocket(path, dir string) (string, error) {
	iface := filepath.Base(path)
	iface = iface[:len(iface)-len(filepath.Ext(iface))]
	link, err := SocketPath(dir, iface)
	if err != nil {
		return "", err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return "", fmt.Errorf("ipc: %w", err)
	}
	if cur, err := os.Lstat(link); err == nil && os.SameFile(cur, fi) {
		return link, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("ipc: creating socket directory: %w", err)
	}
	if err := removeStale(link); err != nil {
		return "", err
	}
	if err := os.Link(path, link); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("ipc: %s appeared meanwhile: %w", link, ErrInUse)
		}
		return "", fmt.Errorf("ipc: linking socket: %w", err)
	}
	return link, nil
}

// Link gives l's socket a second name in dir (see linkSocket), which Close
// removes with the first while it is still this socket.
func (l *Listener) Link(dir string) error {
	link, err := linkSocket(l.path, dir)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.links = append(l.links, link)
	l.mu.Unlock()
	return nil
}

// removeLinks removes l's second names that are still its socket.
func (l *Listener) removeLinks() error {
	l.mu.Lock()
	links := l.links
	l.mu.Unlock()
	var errs []error
	for _, link := range links {
		if socketGone(link, l.ident) {
			continue
		}
		if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
