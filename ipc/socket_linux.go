package ipc

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// watchRemoval closes removed once path stops naming the socket ident. On
// Linux it sleeps in inotify: a watch on the socket inode (IN_ATTRIB fires
// when its link count drops, since the bound socket keeps the inode alive
// and IN_DELETE_SELF would come only after we close it) and one on the
// directory (entries created, moved or deleted, the directory itself
// going). Every event just triggers a fresh Lstat, so missed or merged
// events do no harm.
func watchRemoval(path string, ident os.FileInfo, removed chan struct{}) (stop func(), err error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	const fileEvents = unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
	const dirEvents = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
		unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR
	if _, err := unix.InotifyAddWatch(fd, path, fileEvents); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if _, err := unix.InotifyAddWatch(fd, filepath.Dir(path), dirEvents); err != nil {
		unix.Close(fd)
		return nil, err
	}
	// A non-blocking descriptor goes to the runtime poller, so Read parks
	// the goroutine and Close wakes it.
	f := os.NewFile(uintptr(fd), "inotify")
	var g removalGuard
	go func() {
		defer f.Close()
		buf := make([]byte, 4096)
		// Check before each wait so a removal between Listen and the first
		// event is not missed.
		for !g.check(path, ident, removed) {
			if _, err := f.Read(buf); err != nil {
				return
			}
		}
	}()
	return func() {
		g.stop()
		f.Close()
	}, nil
}
