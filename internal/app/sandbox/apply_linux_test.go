package sandbox

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"golang.org/x/net/bpf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/sys/unix"
)

// The numbers policy.go writes down are the kernel's.
func TestPolicyNumbersAreLinux(t *testing.T) {
	want := map[string]int{"net_admin": unix.CAP_NET_ADMIN, "net_bind_service": unix.CAP_NET_BIND_SERVICE, "sys_admin": unix.CAP_SYS_ADMIN}
	for _, c := range append(Whole.Caps(), MonitorKeep...) {
		if want[c.Name] != c.Bit {
			t.Errorf("%s: bit %d, want %d", c.Name, c.Bit, want[c.Name])
		}
	}
	if DenySetnsExcept != unix.CLONE_NEWNET {
		t.Errorf("DenySetnsExcept %#x, want CLONE_NEWNET", DenySetnsExcept)
	}
	ns := []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET}
	for i, f := range CloneNamespaceFlags {
		if f != ns[i] {
			t.Errorf("CloneNamespaceFlags[%d] = %#x, want %#x", i, f, ns[i])
		}
	}
}

// Every denied name is a system call on amd64 or arm64, and the ones the
// issue names exist on both (iopl, ioperm and a few legacy calls are
// x86's only): a typo would otherwise be skipped silently.
func TestDenyNamesExist(t *testing.T) {
	for _, n := range Deny {
		_, amd := arch.X86_64.SyscallNames[n]
		_, arm := arch.AARCH64.SyscallNames[n]
		if !amd && !arm {
			t.Errorf("%s is a system call on neither amd64 nor arm64", n)
		}
	}
	for _, n := range dangerous {
		for _, a := range []*arch.Info{arch.X86_64, arch.AARCH64} {
			if _, ok := a.SyscallNames[n]; !ok {
				t.Errorf("%s missing on %s", n, a.Name)
			}
		}
	}
	for _, r := range []Role{Whole, Worker, Monitor} {
		for _, unixOK := range []bool{false, true} {
			p, err := seccompPolicy(r, unixOK, os.Getpid())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Assemble(); err != nil {
				t.Fatalf("the filter for role %d does not assemble on %s: %v", r, runtime.GOARCH, err)
			}
		}
	}
	for _, c := range SelfOnly {
		_, amd := arch.X86_64.SyscallNames[c.Name]
		_, arm := arch.AARCH64.SyscallNames[c.Name]
		if !amd || !arm {
			t.Errorf("%s is not a system call on both amd64 and arm64", c.Name)
		}
	}
	if _, err := guardProgram(mustArch(t)); err != nil {
		t.Fatal(err)
	}
}

func mustArch(t *testing.T) *arch.Info {
	info, err := arch.GetInfo("")
	if err != nil {
		t.Fatal(err)
	}
	return info
}

const childEnv = "FIPS_GO_SANDBOX_TEST_CHILD"

// TestApplyInChild applies the sandbox in a copy of this test binary (it
// cannot be undone) and checks there what it promises: execve refused with
// EPERM, NoNewPrivs 1, Seccomp 2 and CapEff exactly Keep on every thread,
// threads started afterwards included; Landlock hiding a file outside its
// rules and the socket directory taking removals only; the CAP_SYS_ADMIN
// system calls beyond setns(CLONE_NEWNET) refused, that setns allowed.
func TestApplyInChild(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		return // the child runs childMain from TestMain's stand-in below
	}
	if os.Geteuid() != 0 {
		if os.Getenv("FIPS_E2E") == "1" {
			t.Fatal("FIPS_E2E=1: this test must run as root")
		}
		t.Skip("needs root: the sandbox drops root's capabilities")
	}
	dir := t.TempDir()
	hidden := filepath.Join(dir, "hidden")
	sock := filepath.Join(dir, "sock")
	for _, p := range []string{hidden, filepath.Join(sock, "uapi.sock")} {
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pr := startProbeTargets(t, dir)
	cmd := exec.Command(os.Args[0], "-test.run=^TestApplyInChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, probeEnv+"="+pr.env())
	cmd.ExtraFiles = []*os.File{pr.tty}
	out, err := cmd.CombinedOutput()
	pr.checkUnharmed(t)
	t.Logf("child:\n%s", out)
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	if !bytes.Contains(out, []byte("child: all checks passed")) {
		t.Fatal("the child did not run its checks")
	}
	if _, err := os.Stat(filepath.Join(sock, "uapi.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the child could not remove the socket from its socket directory: %v", err)
	}
}

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		os.Exit(childMain(dir))
	}
	os.Exit(m.Run())
}

// childMain applies the sandbox and reports each failed check; 0 when all
// passed.
func childMain(dir string) int {
	failed := 0
	fail := func(format string, args ...any) {
		fmt.Printf("FAIL: "+format+"\n", args...)
		failed++
	}
	// Threads that exist before Apply: some locked, so they cannot be
	// reused by the goroutine that applies.
	var before, locked sync.WaitGroup
	release := make(chan struct{})
	for range 4 {
		locked.Add(1)
		before.Go(func() {
			runtime.LockOSThread()
			locked.Done()
			<-release
		})
	}
	locked.Wait()
	// A resolver socket directory that exists, so that its rule (a right
	// only ABI 9 has) is really added whatever the kernel's ABI.
	ResolverSocketDirs = append(ResolverSocketDirs, dir)
	st := Apply(Config{SocketDir: filepath.Join(dir, "sock")})
	fmt.Printf("child: sandbox: %s\n", st)
	for _, p := range st.Problems {
		fail("problem: %s", p)
	}
	if !st.NoNewPrivs || !st.Seccomp || st.Caps != Whole.Names() {
		fail("status %+v", st)
	}
	landlock := st.Landlock > 0
	if !landlock {
		fmt.Println("child: the kernel has no Landlock; its checks are left out")
	}

	// Threads started after Apply inherit it.
	var after sync.WaitGroup
	hold := make(chan struct{})
	for range 4 {
		locked.Add(1)
		after.Go(func() {
			runtime.LockOSThread()
			locked.Done()
			<-hold
		})
	}
	locked.Wait()
	tasks, _ := os.ReadDir("/proc/self/task")
	if len(tasks) < 8 {
		fail("only %d threads", len(tasks))
	}
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			fail("status of thread %s: %v", task.Name(), err)
			continue
		}
		f := statusFields(b)
		if f["NoNewPrivs"] != "1" || f["Seccomp"] != "2" {
			fail("thread %s: NoNewPrivs %q Seccomp %q", task.Name(), f["NoNewPrivs"], f["Seccomp"])
		}
		// The architecture guard and the policy (Linux 5.9 shows the count).
		if n, ok := f["Seccomp_filters"]; ok && n != "2" {
			fail("thread %s: %s seccomp filters, want 2", task.Name(), n)
		}
		for _, k := range []string{"CapEff", "CapPrm", "CapBnd"} {
			v, _ := strconv.ParseUint(f[k], 16, 64)
			if v != Whole.Mask() {
				fail("thread %s: %s %s, want %016x", task.Name(), k, f[k], Whole.Mask())
			}
		}
		for _, k := range []string{"CapInh", "CapAmb"} {
			if v, _ := strconv.ParseUint(f[k], 16, 64); v != 0 {
				fail("thread %s: %s %s, want 0", task.Name(), k, f[k])
			}
		}
	}
	close(hold)
	after.Wait()
	close(release)
	before.Wait()

	if err := syscall.Exec("/bin/true", []string{"true"}, nil); !errors.Is(err, unix.EPERM) {
		fail("execve: %v, want EPERM", err)
	}
	if err := unix.Mount("none", dir, "tmpfs", 0, ""); !errors.Is(err, unix.EPERM) {
		fail("mount: %v, want EPERM", err)
	}
	if err := unix.Unshare(unix.CLONE_NEWUSER); !errors.Is(err, unix.EPERM) {
		fail("unshare: %v, want EPERM", err)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_CLONE, unix.CLONE_NEWUSER|uintptr(unix.SIGCHLD), 0, 0); e != unix.EPERM {
		fail("clone(CLONE_NEWUSER): %v, want EPERM", e)
	}
	var args struct{ flags, pidfd, childTID, parentTID, exitSignal, stack, stackSize, tls uint64 }
	if _, _, e := unix.RawSyscall(unix.SYS_CLONE3, uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args), 0); e != unix.ENOSYS {
		fail("clone3: %v, want ENOSYS", e)
	}
	if _, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0); err != nil {
		fail("socket: %v", err)
	}
	// CAP_NET_BIND_SERVICE: a port below 1024, on loopback.
	if fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err == nil {
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			fail("bind: %v", err)
		}
		unix.Close(fd)
	}
	// setns: a network namespace (our own) joins; a mount namespace is refused.
	func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		netns, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			fail("open own netns: %v", err)
			return
		}
		defer unix.Close(netns)
		if err := unix.Setns(netns, unix.CLONE_NEWNET); err != nil {
			fail("setns(CLONE_NEWNET): %v", err)
		}
		mntns, err := unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			fail("open own mntns: %v", err)
			return
		}
		defer unix.Close(mntns)
		if err := unix.Setns(mntns, unix.CLONE_NEWNS); !errors.Is(err, unix.EPERM) {
			fail("setns(CLONE_NEWNS): %v, want EPERM", err)
		}
	}()
	if _, err := os.ReadFile("/etc/hosts"); err != nil {
		fail("reading /etc/hosts: %v", err)
	}
	if _, err := os.ReadFile("/proc/stat"); err != nil {
		fail("reading /proc/stat: %v", err)
	}
	if landlock {
		if _, err := os.ReadFile(filepath.Join(dir, "hidden")); !errors.Is(err, unix.EACCES) {
			fail("reading a file outside the rules: %v, want EACCES", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "sock", "new"), nil, 0o600); !errors.Is(err, unix.EACCES) {
			fail("creating a file in the socket directory: %v, want EACCES", err)
		}
	}
	if err := os.Remove(filepath.Join(dir, "sock", "uapi.sock")); err != nil {
		fail("removing the socket: %v", err)
	}
	probeAttacks(dir, landlock, fail)
	if failed > 0 {
		return 1
	}
	fmt.Println("child: all checks passed")
	return 0
}

// statusFields parses /proc/PID/status.
func statusFields(b []byte) map[string]string {
	f := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok {
			f[k] = strings.TrimSpace(v)
		}
	}
	return f
}

// The socket family numbers policy.go writes down are the kernel's.
func TestSocketNumbersAreLinux(t *testing.T) {
	for _, c := range []struct{ got, want int }{
		{AFUnix, unix.AF_UNIX}, {AFInet, unix.AF_INET}, {AFInet6, unix.AF_INET6},
		{AFNetlink, unix.AF_NETLINK}, {NetlinkRoute, unix.NETLINK_ROUTE},
	} {
		if c.got != c.want {
			t.Errorf("%d, want %d", c.got, c.want)
		}
	}
}

// The guard filter, run in x/net/bpf's machine on seccomp_data as the
// kernel lays it out: other architectures ENOSYS, the terminal ioctls
// EPERM whatever the upper half of the request holds, the rest allowed.
func TestGuardProgram(t *testing.T) {
	info := mustArch(t)
	raw, err := guardProgram(info)
	if err != nil {
		t.Fatal(err)
	}
	prog, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("the guard does not disassemble")
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	// The machine loads words big-endian, where the kernel's loads are
	// native: each 32-bit word is stored so that it loads as the kernel
	// would load it.
	data := func(archID uint32, nr int, arg1 uint64) []byte {
		b := make([]byte, 64)
		binary.BigEndian.PutUint32(b[0:], uint32(nr))
		binary.BigEndian.PutUint32(b[4:], archID)
		lo, hi := 24, 28
		if !littleEndian() {
			lo, hi = hi, lo
		}
		binary.BigEndian.PutUint32(b[lo:], uint32(arg1))
		binary.BigEndian.PutUint32(b[hi:], uint32(arg1>>32))
		return b
	}
	const (
		allow = unix.SECCOMP_RET_ALLOW
		eperm = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	)
	for _, c := range []struct {
		name string
		in   []byte
		want uint32
	}{
		{"other arch", data(uint32(info.ID)^1, unix.SYS_READ, 0), unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		{"read", data(uint32(info.ID), unix.SYS_READ, unix.TIOCSTI), allow},
		{"TCGETS", data(uint32(info.ID), unix.SYS_IOCTL, unix.TCGETS), allow},
		{"TIOCSTI", data(uint32(info.ID), unix.SYS_IOCTL, unix.TIOCSTI), eperm},
		{"TIOCSTI high bits", data(uint32(info.ID), unix.SYS_IOCTL, unix.TIOCSTI|1<<40), eperm},
		{"TIOCLINUX", data(uint32(info.ID), unix.SYS_IOCTL, unix.TIOCLINUX), eperm},
	} {
		got, err := vm.Run(c.in)
		if err != nil || uint32(got) != c.want {
			t.Errorf("%s: %#x %v, want %#x", c.name, got, err, c.want)
		}
	}
}
