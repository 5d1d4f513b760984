package sandbox

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// The capabilities kept are exactly the ones the code names, each with
// its reason; everything else is dropped. The worker has no
// CAP_SYS_ADMIN.
func TestKeepIsNamed(t *testing.T) {
	for _, tc := range []struct {
		r     Role
		names string
		mask  uint64 // CAP_NET_BIND_SERVICE 10, CAP_NET_ADMIN 12, CAP_SYS_ADMIN 21
	}{
		{Worker, "net_admin,net_bind_service", 1<<10 | 1<<12},
		{Whole, "net_admin,net_bind_service,sys_admin", 1<<10 | 1<<12 | 1<<21},
		{Monitor, "sys_admin,net_admin", 1<<12 | 1<<21},
	} {
		if got := tc.r.Names(); got != tc.names {
			t.Errorf("role %d: Names() = %q, want %q", tc.r, got, tc.names)
		}
		if got := tc.r.Mask(); got != tc.mask {
			t.Errorf("role %d: Mask() = %#x, want %#x", tc.r, got, tc.mask)
		}
	}
	if KeepNames() != Worker.Names() || KeepMask() != Worker.Mask() {
		t.Errorf("Keep is not the worker's")
	}
	for _, c := range append(Whole.Caps(), MonitorKeep...) {
		if len(c.Why) < 40 {
			t.Errorf("%s: the reason it is kept is missing or too short: %q", c.Name, c.Why)
		}
	}
}

// dangerous are the calls the issue names; the deny list must hold each.
var dangerous = []string{
	"init_module", "finit_module", "delete_module", "ptrace", "mount", "umount2",
	"kexec_load", "kexec_file_load", "bpf", "keyctl", "add_key", "request_key",
	"execve", "execveat", "reboot", "swapon", "swapoff", "pivot_root", "chroot",
	"perf_event_open", "userfaultfd", "process_vm_readv", "process_vm_writev",
	"open_by_handle_at", "unshare",
}

// used are calls the Go runtime or the daemon makes after start: none may
// be denied, and clone and setns only with the arguments the filter
// refuses.
var used = []string{
	"read", "write", "readv", "writev", "pread64", "pwrite64", "close", "openat",
	"mmap", "munmap", "mprotect", "madvise", "brk", "futex", "clone", "clone3",
	"exit", "exit_group", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn",
	"sigaltstack", "tgkill", "getpid", "gettid", "sched_yield", "sched_getaffinity",
	"nanosleep", "clock_gettime", "clock_nanosleep", "getrandom",
	"epoll_create1", "epoll_ctl", "epoll_pwait", "epoll_pwait2", "eventfd2", "pipe2",
	"socket", "bind", "connect", "listen", "accept4", "getsockname", "getpeername",
	"setsockopt", "getsockopt", "sendto", "recvfrom", "sendmsg", "recvmsg",
	"sendmmsg", "recvmmsg", "shutdown", "ioctl", "fcntl", "fstat", "newfstatat",
	"statx", "getdents64", "unlinkat", "inotify_init1", "inotify_add_watch",
	"setns", "prctl", "capget", "capset", "seccomp", "getrusage", "uname",
	"timer_create", "timer_settime", "timer_delete", "rseq", "membarrier",
	"pidfd_open", "pidfd_send_signal", "waitid", "wait4", "kill", "sysinfo",
	"getuid", "geteuid", "getgid", "getegid", "prlimit64", "fstatfs", "lseek",
	"set_robust_list", "set_tid_address", "mincore", "landlock_create_ruleset",
	"landlock_add_rule", "landlock_restrict_self",
}

func TestDenyList(t *testing.T) {
	for _, n := range dangerous {
		if !slices.Contains(Deny, n) {
			t.Errorf("%s is not denied", n)
		}
	}
	for _, n := range used {
		if slices.Contains(Deny, n) {
			t.Errorf("%s is denied, but the runtime or the daemon uses it", n)
		}
	}
	seen := map[string]bool{}
	for _, n := range Deny {
		if seen[n] {
			t.Errorf("%s listed twice", n)
		}
		seen[n] = true
	}
}

// The namespace flags clone may not carry are none of those the Go
// runtime (runtime/os_linux.go cloneFlags) or glibc's pthread_create (a
// cgo build's threads) pass.
func TestCloneFlagsMissThreads(t *testing.T) {
	const (
		goThreads = 0x100 | 0x200 | 0x400 | 0x800 | 0x40000 | 0x10000 // VM FS FILES SIGHAND SYSVSEM THREAD
		pthreads  = goThreads | 0x80000 | 0x100000 | 0x200000         // SETTLS PARENT_SETTID CHILD_CLEARTID
	)
	for _, f := range CloneNamespaceFlags {
		if f&pthreads != 0 {
			t.Errorf("clone flag %#x is one threads are created with", f)
		}
	}
	if len(CloneNamespaceFlags) != 7 {
		t.Errorf("%d namespace flags, want the 7 clone(2) takes", len(CloneNamespaceFlags))
	}
}

func TestReadPaths(t *testing.T) {
	links := map[string]string{
		"/etc/resolv.conf":   "/run/systemd/resolve/stub-resolv.conf",
		"/etc/hosts":         "/etc/hosts",
		"/etc/nsswitch.conf": "/etc/alternatives/nsswitch.conf",
	}
	dirs := ReadPaths(func(p string) (string, error) {
		if l, ok := links[p]; ok {
			return l, nil
		}
		return "", errors.New("no such file")
	})
	if want := append(slices.Clone(ReadDirs), "/run/systemd/resolve"); !slices.Equal(dirs, want) {
		t.Fatalf("ReadPaths = %q, want %q", dirs, want)
	}
	if dirs := ReadPaths(func(p string) (string, error) { return p, nil }); !slices.Equal(dirs, ReadDirs) {
		t.Fatalf("without links: %q", dirs)
	}
	for _, d := range ReadDirs {
		if d == "/" || d == "/usr" || strings.HasPrefix(d, "/sys") || d == "/dev" || d == "/var" || d == "/home" || d == "/root" {
			t.Errorf("%s is readable: too much", d)
		}
	}
}

func TestWriteDirs(t *testing.T) {
	c := Config{SocketDir: "/var/run/wireguard", WriteFiles: []string{"/tmp/p/mem", "/tmp/p/cpu", "/var/run/wireguard/x"}}
	if got, want := c.WriteDirs(), []string{"/var/run/wireguard", "/tmp/p"}; !slices.Equal(got, want) {
		t.Fatalf("WriteDirs = %q, want %q", got, want)
	}
	if got := (Config{}).WriteDirs(); len(got) != 0 {
		t.Fatalf("nothing to write: %q", got)
	}
}

func TestStatusString(t *testing.T) {
	for _, tc := range []struct {
		s    Status
		want string
	}{
		{Status{Off: true}, "off"},
		{Status{Unsupported: true}, "unsupported on this system"},
		{Status{Caps: "net_admin,net_bind_service,sys_admin", NoNewPrivs: true, Seccomp: true, Landlock: 5},
			"caps=net_admin,net_bind_service,sys_admin no_new_privs seccomp landlock=v5 uid=0"},
		{Status{Caps: "net_admin", NoNewPrivs: true, Seccomp: true, UID: 61234}, "caps=net_admin no_new_privs seccomp landlock unavailable uid=61234"},
		{Status{}, "caps not dropped no seccomp landlock unavailable uid=0"},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.s, got, tc.want)
		}
	}
}
