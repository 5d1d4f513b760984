package privsep

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Pair returns the two ends of a new SOCK_SEQPACKET pair: the monitor's,
// and the worker's, to pass on with exec.Cmd.ExtraFiles. Seqpacket keeps
// each request one message, so a request is never read in pieces.
func Pair() (monitor, worker *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("privsep: socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "monitor"), os.NewFile(uintptr(fds[1]), "worker"), nil
}

// Capabilities the worker is started with (ambient, so that they survive
// the change of user and the exec): CAP_NET_ADMIN and
// CAP_NET_BIND_SERVICE, for which package sandbox's Keep says why. The
// caller drops every other capability from the bounding set first, so
// that the worker cannot gain one back.
var workerCaps = []uintptr{unix.CAP_NET_ADMIN, unix.CAP_NET_BIND_SERVICE}

// Start starts cmd as the worker: as uid and gid uid with no
// supplementary groups, with workerCaps, and killed (SIGKILL) if the
// monitor dies first. It returns a channel that delivers cmd.Wait's
// result once the worker has exited.
//
// The kernel sends the parent-death signal when the thread that started
// the child ends, not the process, so Start starts it from a thread
// locked for the worker's whole life (the Go runtime ends threads now
// and then).
func Start(cmd *exec.Cmd, uid int) (<-chan error, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	a := cmd.SysProcAttr
	a.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}
	a.AmbientCaps = workerCaps
	a.Pdeathsig = syscall.SIGKILL
	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread ends with this goroutine, after the
		// worker did.
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("privsep: starting the worker as uid %d: %w", uid, err)
	}
	return exited, nil
}
