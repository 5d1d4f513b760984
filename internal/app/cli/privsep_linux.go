package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/fips-go/fips-go/internal/app/privsep"
	"github.com/fips-go/fips-go/internal/app/sandbox"
	"github.com/fips-go/fips-go/ipc"
	"github.com/fips-go/fips-go/tun"
	"golang.org/x/sys/unix"
)

// separate says whether the interface daemon runs as two processes
// (package privsep): whenever its sandbox is on and it starts as root.
// A daemon started by another user (with file capabilities, say) is
// unprivileged already and sandboxes itself as one process.
func separate(st settings) bool { return !st.noSandbox && os.Geteuid() == 0 }

// monitorForeground is `fips-go -f IFACE` with the daemon separated: the
// monitor keeps a copy of the TUN's descriptor, and the worker gets the
// TUN and the UAPI socket as a daemonizing parent would pass them.
func monitorForeground(name string, t tun.Device, l *ipc.Listener, mc metricsConfig, st settings) error {
	tf, err := dupFile(t.File(), "tun")
	if err != nil {
		l.Close()
		t.Close()
		return err
	}
	uf, err := l.Detach()
	t.Close()
	if err != nil {
		tf.Close()
		return err
	}
	mf, err := metricsFile(mc)
	if err != nil {
		removeSocket(name)
		tf.Close()
		uf.Close()
		return err
	}
	return runMonitor(name, tf, uf, mf, st)
}

// removeSocket removes iface's UAPI socket file: what the monitor does
// when no worker got going.
func removeSocket(iface string) {
	if path, err := ipc.SocketPath(ipc.DefaultSocketDir, iface); err == nil {
		if fi, err := os.Lstat(path); err == nil {
			if li, err := os.Lstat(awgSocketPath(iface)); err == nil && os.SameFile(fi, li) {
				os.Remove(awgSocketPath(iface))
			}
		}
		os.Remove(path)
	}
}

// dupFile duplicates f's descriptor without f.Fd(), which would make a
// non-blocking descriptor blocking for everyone who shares it.
func dupFile(f *os.File, name string) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, fmt.Errorf("dup %s: %w", name, derr)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// runMonitor is the root half of a separated daemon. It starts the worker
// as a user of its own with the TUN (tf), the UAPI socket (uf) and the
// metrics socket (mf, may be nil), sandboxes itself, and then only
// answers the worker (privsep.Monitor) until the worker exits; on
// SIGINT or SIGTERM it removes the UAPI socket file, which stops the
// worker as `wg-quick down` does. It removes the file in any case once
// the worker is gone (killed, say), and exits as the worker did.
func runMonitor(iface string, tf, uf, mf *os.File, st settings) error {
	_, errf := loggers(fmt.Sprintf("fips-go(%s) monitor: ", iface))
	// Before the worker starts: the daemonizing parent reports ready as
	// soon as the worker answers, and a SIGTERM from then on must find
	// the monitor listening, not end it (and, through the parent-death
	// signal, the worker) with the socket file left behind.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	m, exited, err := startWorker(iface, tf, uf, mf, st)
	uf.Close()
	if mf != nil {
		mf.Close()
	}
	if err != nil {
		tf.Close()
		removeSocket(iface)
		return err
	}
	// After the worker has its copies: the monitor keeps sys_admin and
	// net_admin only, and removing files from the socket directory.
	sb := sandbox.Apply(sandbox.Config{Role: sandbox.Monitor, SocketDir: ipc.DefaultSocketDir, LinkDir: ipc.AmneziaSocketDir})
	for _, p := range sb.Problems {
		errf("sandbox: %s", p)
	}
	go m.Serve()
	// From here on the monitor only relays a few small requests: the heap
	// the start-up used (configuration, the worker's exec) goes back to
	// the system instead of waiting for the scavenger.
	debug.FreeOSMemory()
wait:
	for {
		select {
		case <-sig:
			m.RemoveSocket()
		case err = <-exited:
			break wait
		}
	}
	m.RemoveSocket()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Errorf("the worker was killed by %v", ws.Signal())
		}
		os.Exit(ee.ExitCode())
	}
	return err
}

// startWorker picks the worker's uid, creates the profile files it will
// write, and starts it; the monitor that answers it is returned with the
// channel that says when it exited.
func startWorker(iface string, tf, uf, mf *os.File, st settings) (*privsep.Monitor, <-chan error, error) {
	taken, err := privsep.Taken()
	if err != nil {
		return nil, nil, err
	}
	uid, err := privsep.PickUID(os.Getpid(), taken)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range []string{st.cpuProfile, st.memProfile} {
		if p == "" {
			continue
		}
		// The worker cannot create files in root's directories: it gets
		// one of its own to write.
		if err := ownedFile(p+"."+iface, uid); err != nil {
			return nil, nil, err
		}
	}
	// Nor the state file beside its socket; it keeps what the last
	// process wrote, for the worker to read (and owned by whichever uid
	// the last worker had).
	if err := ownedKept(stateFile(iface), uid); err != nil {
		return nil, nil, fmt.Errorf("state file: %w", err)
	}
	path, err := ipc.SocketPath(ipc.DefaultSocketDir, iface)
	if err != nil {
		return nil, nil, err
	}
	// The worker watches its socket file (inotify wants read access) to
	// stop when it is removed. root's clients (wg, wg-quick) connect
	// whoever owns it; a worker that chmod'ed it open would hand others
	// nothing it does not hold itself.
	if err := os.Lchown(path, uid, uid); err != nil {
		return nil, nil, fmt.Errorf("UAPI socket: %w", err)
	}
	mon, wrk, err := privsep.Pair()
	if err != nil {
		return nil, nil, err
	}
	defer wrk.Close()
	m, err := privsep.NewMonitor(mon, tf, path, awgSocketPath(iface))
	mon.Close()
	if err != nil {
		return nil, nil, err
	}
	// Nothing the worker could exec may give it back what it lacks.
	if err := sandbox.LimitBounding(sandbox.Keep); err != nil {
		return nil, nil, fmt.Errorf("capability bounding set: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("finding own executable: %w", err)
	}
	// Through /proc/self/exe, resolved in the child as it execs: the
	// worker's user may not search the directory the binary lies in
	// (/root/go/bin is 0700), and the magic link does not ask it to.
	cmd := exec.Command("/proc/self/exe", iface)
	cmd.Args[0] = self
	cmd.Env = append(withoutFDs(os.Environ()), envTunFD+"=3", envUAPIFD+"=4", envMonitorFD+"=5", envForeground+"=1")
	cmd.ExtraFiles = []*os.File{tf, uf, wrk}
	if mf != nil {
		cmd.Env = append(cmd.Env, envMetricsFD+"=6")
		cmd.ExtraFiles = append(cmd.ExtraFiles, mf)
	}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	exited, err := privsep.Start(cmd, uid)
	if err != nil {
		return nil, nil, err
	}
	return m, exited, nil
}

// withoutFDs is env without the descriptor variables a parent set.
func withoutFDs(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k != envTunFD && k != envUAPIFD && k != envMetricsFD && k != envMonitorFD {
			out = append(out, kv)
		}
	}
	return out
}

// ownedFile creates (or truncates) path for uid, mode 0600.
func ownedFile(path string, uid int) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Chown(uid, uid)
}

// ownedKept creates path if missing, keeping its contents, and gives it
// to uid, mode 0600. A link there is refused (O_NOFOLLOW): root must not
// hand the worker a file it was pointed at.
func ownedKept(path string, uid int) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	return f.Chown(uid, uid)
}

// workerRole hooks the worker's TUN to its monitor: route sockets in the
// interface's namespace come from the monitor.
func workerRole(t tun.Device, monitor *os.File) (daemonRole, error) {
	c, err := privsep.NewClient(monitor)
	if err != nil {
		return daemonRole{}, err
	}
	if rs, ok := t.(interface {
		UseRouteSockets(func(groups uint32) (*os.File, error))
	}); ok {
		rs.UseRouteSockets(c.RouteSocket)
	}
	return daemonRole{sandbox: sandbox.Worker, exit: c.Exit}, nil
}
