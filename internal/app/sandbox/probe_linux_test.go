package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The attacks a compromised daemon would try, each against a target the
// (unsandboxed, root) test process sets up: a root-only and an abstract
// Unix socket, a root process to signal and limit, a SysV shared memory
// segment to remove, and a terminal to type into.

const probeEnv = "FIPS_GO_SANDBOX_PROBE"

type probeTargets struct {
	sleep    *exec.Cmd
	shmID    int
	abstract string
	tty      *os.File // a pty's follower end, the child's fd 3
}

func (p probeTargets) env() string {
	return fmt.Sprintf("%d,%d,%s", p.sleep.Process.Pid, p.shmID, p.abstract)
}

func startProbeTargets(t *testing.T, dir string) probeTargets {
	t.Helper()
	var p probeTargets
	// A Unix socket only root may use, and an abstract one: both listen
	// for as long as the test runs (connect succeeds on the backlog).
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "root-only.sock"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if err := os.Chmod(filepath.Join(dir, "root-only.sock"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.abstract = fmt.Sprintf("@fips-go-sandbox-probe-%d", os.Getpid())
	aln, err := net.ListenUnix("unix", &net.UnixAddr{Name: p.abstract, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { aln.Close() })
	p.sleep = exec.Command("sleep", "600")
	if err := p.sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.sleep.Process.Kill(); p.sleep.Wait() })
	if p.shmID, err = unix.SysvShmGet(unix.IPC_PRIVATE, 4096, unix.IPC_CREAT|0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.SysvShmCtl(p.shmID, unix.IPC_RMID, nil) })
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptm.Close() })
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	if p.tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.tty.Close() })
	return p
}

// checkUnharmed checks after the child that its attacks left the targets
// as they were.
func (p probeTargets) checkUnharmed(t *testing.T) {
	t.Helper()
	// A killed child stays a zombie until reaped: its state tells.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.sleep.Process.Pid))
	if _, after, ok := strings.Cut(string(b), ") "); err != nil || !ok || after[0] != 'S' {
		t.Errorf("the root process the child signalled: %q %v, want sleeping", b, err)
	}
	var ds unix.SysvShmDesc
	if _, err := unix.SysvShmCtl(p.shmID, unix.IPC_STAT, &ds); err != nil {
		t.Errorf("the shared memory segment: %v", err)
	} else if ds.Perm.Mode&0o1000 != 0 { // SHM_DEST: marked for removal
		t.Error("the child marked root's shared memory segment for removal")
	}
}

// probeAttacks runs in the sandboxed child: every attack must fail, and
// what the daemon itself does still work.
func probeAttacks(dir string, landlock bool, fail func(string, ...any)) {
	f := strings.Split(os.Getenv(probeEnv), ",")
	if len(f) != 3 {
		fail("%s=%q", probeEnv, os.Getenv(probeEnv))
		return
	}
	pid, _ := strconv.Atoi(f[0])
	shmID, _ := strconv.Atoi(f[1])
	for _, path := range []string{filepath.Join(dir, "root-only.sock"), f[2]} {
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			fail("connecting to the Unix socket %s worked", path)
		}
	}
	if landlock {
		if _, err := os.ReadFile("/etc/shadow"); err == nil {
			fail("reading /etc/shadow worked")
		}
	}
	probeProcesses(pid, shmID, fail)
	probeSockets(fail)
	probeTerminal(fail)
}

func probeProcesses(pid, shmID int, fail func(string, ...any)) {
	if err := unix.Kill(pid, unix.SIGTERM); !errors.Is(err, unix.EPERM) {
		fail("kill(root process): %v, want EPERM", err)
	}
	// pid_t is 32 bits: high bits must not get a call past the filter.
	if _, _, e := unix.RawSyscall(unix.SYS_KILL, uintptr(pid)|1<<32, uintptr(unix.SIGTERM), 0); e != unix.EPERM {
		fail("kill(root process, high bits): %v, want EPERM", e)
	}
	if err := unix.Kill(os.Getpid(), 0); err != nil {
		fail("kill(self, 0): %v", err)
	}
	var old unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &old); !errors.Is(err, unix.EPERM) {
		fail("prlimit(root process): %v, want EPERM", err)
	}
	if err := unix.Prlimit(0, unix.RLIMIT_NOFILE, nil, &old); err != nil {
		fail("prlimit(self): %v", err)
	}
	if _, err := unix.SysvShmCtl(shmID, unix.IPC_RMID, nil); !errors.Is(err, unix.EPERM) {
		fail("shmctl(IPC_RMID) on root's segment: %v, want EPERM", err)
	}
}

func probeSockets(fail func(string, ...any)) {
	for _, s := range []struct {
		name          string
		family, proto int
	}{
		{"netfilter netlink", unix.AF_NETLINK, unix.NETLINK_NETFILTER},
		{"XFRM netlink", unix.AF_NETLINK, unix.NETLINK_XFRM},
		{"uevent netlink", unix.AF_NETLINK, unix.NETLINK_KOBJECT_UEVENT},
		{"audit netlink", unix.AF_NETLINK, unix.NETLINK_AUDIT},
		{"vsock", unix.AF_VSOCK, 0},
		{"packet", unix.AF_PACKET, 0},
	} {
		typ := unix.SOCK_RAW
		if s.family == unix.AF_VSOCK {
			typ = unix.SOCK_STREAM
		}
		if fd, err := unix.Socket(s.family, typ|unix.SOCK_CLOEXEC, s.proto); err == nil {
			unix.Close(fd)
			fail("a %s socket opened", s.name)
		}
	}
	if fd, _, e := unix.RawSyscall(unix.SYS_SOCKET, unix.AF_NETLINK|1<<32, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER); e == 0 {
		unix.Close(int(fd))
		fail("a netfilter netlink socket opened with high bits in the family")
	}
	for _, s := range []struct{ family, typ, proto int }{
		{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE},
		{unix.AF_INET, unix.SOCK_DGRAM, 0},
		{unix.AF_INET6, unix.SOCK_STREAM, 0},
	} {
		fd, err := unix.Socket(s.family, s.typ|unix.SOCK_CLOEXEC, s.proto)
		if err != nil {
			fail("socket(%d, %d, %d): %v", s.family, s.typ, s.proto, err)
			continue
		}
		unix.Close(fd)
	}
}

// probeTerminal types into the terminal on fd 3, which root may do.
func probeTerminal(fail func(string, ...any)) {
	c := byte('x')
	for _, req := range []uintptr{unix.TIOCSTI, unix.TIOCSTI | 1<<32} {
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, 3, req, uintptr(unsafe.Pointer(&c))); e != unix.EPERM {
			fail("ioctl(TIOCSTI %#x): %v, want EPERM", req, e)
		}
	}
	sub := byte(6) // TIOCL_SETKMSGREDIRECT: move the kernel's messages
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, 3, unix.TIOCLINUX, uintptr(unsafe.Pointer(&sub))); e != unix.EPERM {
		fail("ioctl(TIOCLINUX): %v, want EPERM", e)
	}
	if _, err := unix.IoctlGetTermios(3, unix.TCGETS); err != nil {
		fail("TCGETS: %v", err)
	}
}
