package ipc

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// DefaultSocketDir is where wg(8) looks for userspace interfaces.
const DefaultSocketDir = "/var/run/wireguard"

// ErrInUse is returned (wrapped) by Listen when a live process answers on
// the interface's socket.
var ErrInUse = errors.New("interface already in use by another process")

// Listener is an interface's UAPI socket. It owns the socket file: Close
// removes it (if it is still ours), and Removed reports when someone else
// deletes or replaces it, which is the daemon's cue to exit.
type Listener struct {
	ln      *net.UnixListener
	path    string
	ident   os.FileInfo // the socket file as created, to tell a replacement apart
	removed chan struct{}
	stop    func() // stops the removal watcher

	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex // guards the fields below
	closed  bool
	serving bool
	conns   map[net.Conn]struct{}
	links   []string       // second names of the socket (see Link)
	wg      sync.WaitGroup // connection goroutines
}

// SocketPath returns dir/IFACE.sock, dir defaulting to DefaultSocketDir.
func SocketPath(dir, iface string) (string, error) {
	if dir == "" {
		dir = DefaultSocketDir
	}
	if err := checkIfaceName(iface); err != nil {
		return "", err
	}
	return filepath.Join(dir, iface+".sock"), nil
}

// checkIfaceName accepts what wg-quick accepts, ^[a-zA-Z0-9_=+.-]{1,15}$,
// which also keeps the name from escaping the socket directory.
func checkIfaceName(s string) error {
	if len(s) == 0 || len(s) > 15 || s == "." || s == ".." {
		return fmt.Errorf("ipc: interface name %q: want 1 to 15 of a-z A-Z 0-9 _ = + . -", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '=' || c == '+' || c == '.' || c == '-') {
			return fmt.Errorf("ipc: interface name %q: want 1 to 15 of a-z A-Z 0-9 _ = + . -", s)
		}
	}
	return nil
}

// Listen creates the UAPI socket dir/IFACE.sock (dir defaults to
// DefaultSocketDir and is created 0755 if missing). The socket is mode 0600
// from the moment it has its name: it is bound inside a private 0700
// directory, chmod'ed, then hard-linked into place, which also fails rather
// than clobbering a socket another process created meanwhile. An existing
// socket that answers is left alone (ErrInUse); one that refuses
// connections is a stale leftover and is removed.
func Listen(dir, iface string) (*Listener, error) {
	path, err := SocketPath(dir, iface)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("ipc: creating socket directory: %w", err)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ln, err := bindPrivate(path, iface)
	if err != nil {
		return nil, err
	}
	l, err := newListener(ln, path)
	if err != nil {
		ln.Close()
		os.Remove(path)
		return nil, err
	}
	return l, nil
}

// removeStale clears the way for a new socket at path, refusing when the
// existing one is live or is not a socket at all.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ipc: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("ipc: %s exists and is not a socket; not touching it", path)
	}
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("ipc: %s: %w", path, ErrInUse)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("ipc: probing existing socket %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("ipc: removing stale socket: %w", err)
	}
	return nil
}

func bindPrivate(path, iface string) (*net.UnixListener, error) {
	tmpDir, err := os.MkdirTemp(filepath.Dir(path), "."+iface+".tmp")
	if err != nil {
		return nil, fmt.Errorf("ipc: %w", err)
	}
	defer os.RemoveAll(tmpDir)
	tmp := filepath.Join(tmpDir, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("ipc: binding socket: %w", err)
	}
	// The file is ours to manage: Close removes the public name only if it
	// still is our socket, and the private name goes with tmpDir.
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("ipc: %w", err)
	}
	if err := os.Link(tmp, path); err != nil {
		ln.Close()
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("ipc: %s appeared while starting: %w", path, ErrInUse)
		}
		return nil, fmt.Errorf("ipc: publishing socket: %w", err)
	}
	return ln, nil
}

// FileListener wraps a listening socket inherited from a parent process (the
// daemon is re-executed with the socket on a file descriptor); path is the
// socket's name, which the Listener then owns as if it had created it. f may
// be closed after the call.
func FileListener(f *os.File, path string) (*Listener, error) {
	nl, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("ipc: inherited socket: %w", err)
	}
	ln, ok := nl.(*net.UnixListener)
	if !ok {
		nl.Close()
		return nil, fmt.Errorf("ipc: inherited descriptor is a %T, not a unix socket", nl)
	}
	ln.SetUnlinkOnClose(false)
	l, err := newListener(ln, path)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return l, nil
}

func newListener(ln *net.UnixListener, path string) (*Listener, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("ipc: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return nil, fmt.Errorf("ipc: %s is not a socket", path)
	}
	l := &Listener{
		ln:      ln,
		path:    path,
		ident:   fi,
		removed: make(chan struct{}),
		conns:   make(map[net.Conn]struct{}),
	}
	stop, err := watchRemoval(path, fi, l.removed)
	if err != nil {
		return nil, fmt.Errorf("ipc: watching %s: %w", path, err)
	}
	l.stop = stop
	return l, nil
}

// socketGone reports whether path no longer names the socket ident.
func socketGone(path string, ident os.FileInfo) bool {
	fi, err := os.Lstat(path)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
	}
	return !os.SameFile(fi, ident)
}

// removalGuard makes "the file is gone" and "the watcher was stopped"
// mutually exclusive, so Close, which stops the watcher and then removes the
// file itself, never fires Removed.
type removalGuard struct {
	mu      sync.Mutex // guards stopped
	stopped bool
}

// check closes removed and returns true if path no longer names ident; it
// also returns true, without closing, once stopped.
func (g *removalGuard) check(path string, ident os.FileInfo, removed chan struct{}) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return true
	}
	if socketGone(path, ident) {
		close(removed)
		return true
	}
	return false
}

func (g *removalGuard) stop() {
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
}

// Path returns the socket's file name.
func (l *Listener) Path() string { return l.path }

// Removed is closed when the socket file is deleted or replaced by another
// file, but not by Close.
func (l *Listener) Removed() <-chan struct{} { return l.removed }

// Close stops accepting, closes every open connection and removes the socket
// file if it is still the one this Listener owns. Serve returns once its
// connections are done.
func (l *Listener) Close() error {
	return l.shutdown(true)
}

// Detach hands the socket over to another process: it returns a duplicate of
// the listening descriptor (for exec.Cmd.ExtraFiles) and closes this
// Listener without removing the socket file.
func (l *Listener) Detach() (*os.File, error) {
	f, err := l.ln.File()
	if err != nil {
		return nil, fmt.Errorf("ipc: %w", err)
	}
	if err := l.shutdown(false); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (l *Listener) shutdown(removeFile bool) error {
	l.closeOnce.Do(func() {
		l.stop()
		l.mu.Lock()
		l.closed = true
		for c := range l.conns {
			c.Close()
		}
		l.mu.Unlock()
		err := l.ln.Close()
		if removeFile {
			err = errors.Join(err, l.removeLinks())
		}
		if removeFile && !socketGone(l.path, l.ident) {
			if rerr := os.Remove(l.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = errors.Join(err, rerr)
			}
		}
		if err != nil {
			l.closeErr = fmt.Errorf("ipc: closing %s: %w", l.path, err)
		}
	})
	return l.closeErr
}
