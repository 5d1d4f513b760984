// Package sandbox takes from the interface daemon the privileges it no
// longer needs once its TUN, UAPI socket and UDP sockets exist: the
// capabilities it does not use, new privileges through exec, most of the
// file system (Landlock) and the system calls a network daemon never makes
// (seccomp). The policy (which capabilities, which paths, which system
// calls) is data in this file, checked by unit tests; Apply, at the edge,
// turns it on for every OS thread of the process.
//
// Only Linux has these facilities. Elsewhere Apply does nothing and says
// so (Status.Unsupported); FreeBSD's Capsicum would need the daemon built
// around capabilities from the start, which this package does not try.
package sandbox

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Capability is one Linux capability the daemon keeps, with the reason.
type Capability struct {
	Name string // as in capabilities(7), lower case without CAP_: "net_admin"
	Bit  int    // its number (linux/capability.h; stable kernel ABI)
	Why  string
}

// Keep are the capabilities the worker, the daemon's unprivileged half,
// still uses; every other one is dropped from the effective, permitted,
// inheritable, ambient and bounding sets. Each is reached from the
// network path or from UAPI at any time after start, so none can be
// dropped once set-up is done.
var Keep = []Capability{
	{
		Name: "net_admin", Bit: 12,
		Why: "SO_MARK for fwmark (UAPI fwmark=, any time); RTM_NEWLINK for the " +
			"interface's gso_max_size; TUNGETDEVNETNS, and rtnetlink on the sockets " +
			"the monitor opens in the namespace the interface was moved to; " +
			"SO_RCVBUFFORCE/SO_SNDBUFFORCE on the UDP sockets it opens again when " +
			"the listen port changes",
	},
	{
		Name: "net_bind_service", Bit: 10,
		Why: "UAPI listen_port= may name a port below 1024 at any time, and the " +
			"per-peer connected sockets bind that same port",
	},
}

// sysAdmin is what joining a network namespace takes.
var sysAdmin = Capability{
	Name: "sys_admin", Bit: 21,
	Why: "setns(CLONE_NEWNET) into the namespace the interface was moved to " +
		"(`ip link set IFACE netns NS`), to open route sockets there: the kernel " +
		"asks CAP_SYS_ADMIN for any setns. The seccomp filter narrows it: setns " +
		"only for network namespaces, and mount, unshare, namespace-creating " +
		"clone, swapon, quotactl, bpf and the other CAP_SYS_ADMIN system calls " +
		"refused",
}

// MonitorKeep are the capabilities of the monitor, the daemon's root
// half, which opens route sockets in the interface's namespace for the
// worker (package privsep).
var MonitorKeep = []Capability{
	sysAdmin,
	{
		Name: "net_admin", Bit: 12,
		Why: "TUNGETDEVNETNS, to find the namespace the interface lives in now",
	},
}

// Role says which process a policy is for.
type Role int

const (
	// Whole is a daemon that runs as one process as root: it keeps Keep
	// and CAP_SYS_ADMIN, to join the interface's namespace itself.
	Whole Role = iota
	// Worker is the daemon's unprivileged half: Keep only; setns is
	// refused outright.
	Worker
	// Monitor is the root half: MonitorKeep, and no files at all but
	// removing the UAPI socket from its directory.
	Monitor
)

// Caps are the capabilities r keeps.
func (r Role) Caps() []Capability {
	switch r {
	case Worker:
		return Keep
	case Monitor:
		return MonitorKeep
	}
	return append(append([]Capability(nil), Keep...), sysAdmin)
}

// Names are r's capabilities' names, comma-separated, in Caps' order.
func (r Role) Names() string {
	var names []string
	for _, c := range r.Caps() {
		names = append(names, c.Name)
	}
	return strings.Join(names, ",")
}

// Mask is r's capabilities as a bit mask (CapEff in /proc/PID/status).
func (r Role) Mask() uint64 {
	var m uint64
	for _, c := range r.Caps() {
		m |= 1 << c.Bit
	}
	return m
}

// KeepNames is Keep's names, comma-separated, in Keep's order.
func KeepNames() string { return Worker.Names() }

// KeepMask is Keep as a capability bit mask.
func KeepMask() uint64 { return Worker.Mask() }

// Deny are the system calls the filter refuses with EPERM. The filter is a
// deny list over a default of allow, on purpose: an allow list would have
// to name every call the Go runtime (and, in a cgo build, glibc) makes,
// and a release that starts using a new one (as glibc took up clone3 and
// rseq) would then break the daemon in the field, where no test looked.
// Everything named here is something neither the runtime nor the daemon
// needs after start; the test that checks this list also checks that
// none of the calls the daemon does make is in it.
// Names a kernel architecture does not have (iopl on arm64) are skipped
// there.
var Deny = []string{
	// Kernel modules and replacing the kernel.
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	"reboot",
	// Reading or writing other processes.
	"ptrace", "process_vm_readv", "process_vm_writev", "process_madvise",
	"kcmp", "pidfd_getfd",
	// Running anything else: the daemon never execs after start.
	"execve", "execveat",
	// File systems and namespaces (setns is refused to the worker and
	// allowed to the others for network namespaces only, see
	// DenySetnsExcept; clone with namespace flags, see
	// CloneNamespaceFlags).
	"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
	"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "unshare",
	"swapon", "swapoff", "quotactl", "quotactl_fd",
	"open_by_handle_at", "name_to_handle_at",
	// Kernel interfaces with a large attack surface the daemon has no use for.
	"bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"fanotify_init", "lookup_dcookie", "personality", "uselib",
	// The machine's identity, clock and logs.
	"sethostname", "setdomainname", "settimeofday", "clock_settime",
	"clock_adjtime", "adjtimex", "acct", "syslog", "vhangup",
	// Hardware ports (x86).
	"iopl", "ioperm",
	// Other processes' System V and POSIX IPC objects (root's, to remove
	// or read): the daemon has none of its own.
	"shmget", "shmat", "shmdt", "shmctl", "msgget", "msgsnd", "msgrcv", "msgctl",
	"semget", "semop", "semtimedop", "semctl", "mq_open", "mq_unlink",
	"mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
	// Other processes' scheduling, priority and memory placement
	// (setpriority takes a user or a process group too); tkill names a
	// thread of any process (the runtime signals its threads with tgkill).
	"setpriority", "ioprio_set", "migrate_pages", "move_pages", "tkill",
}

// SelfOnly are the system calls that name a process by pid in their
// first argument: the daemon may aim them at itself only (its own pid, or
// 0 where 0 means the caller: ZeroIsSelf), and any other pid is refused
// with EPERM. kill's 0 is the caller's process group, and -1 every
// process. Landlock's signal scope (ABI 6) refuses signals to processes
// outside the daemon too; this works on older kernels, and for the
// resource limits and scheduling Landlock does not cover.
var SelfOnly = []struct {
	Name       string
	ZeroIsSelf bool
}{
	{"kill", false}, {"tgkill", false}, {"rt_sigqueueinfo", false}, {"rt_tgsigqueueinfo", false},
	{"prlimit64", true}, {"sched_setaffinity", true}, {"sched_setscheduler", true},
	{"sched_setparam", true}, {"sched_setattr", true},
}

// Socket families the daemon opens after start (linux/socket.h and
// linux/netlink.h numbers): UDP and TCP over IPv4 and IPv6 (the bind,
// streams, DNS), and route netlink (tun's MTU and link state, the
// interface list). Any other family, and netlink with any other protocol
// (netfilter, XFRM, audit, uevent), is refused. AF_UNIX is allowed only
// where Landlock confines it (ABI 9 restricts connecting to named
// sockets, ABI 6 scopes abstract ones): glibc's resolver may use nscd's
// and systemd-resolved's sockets; where it is refused, those NSS sources
// fail and the ones after them in nsswitch.conf answer.
const (
	AFUnix       = 1
	AFInet       = 2
	AFInet6      = 10
	AFNetlink    = 16
	NetlinkRoute = 0
)

// DenySetnsExcept is the one namespace type setns may join
// (CLONE_NEWNET), for the roles that keep CAP_SYS_ADMIN: tun (Whole) or
// the monitor opens route sockets in the namespace the interface was
// moved to; any other type (mount, user, pid) is refused.
const DenySetnsExcept = 0x40000000

// CloneNamespaceFlags are clone's flags that create namespaces; clone
// with any of them is refused (the runtime's threads never set them).
// clone3 passes its flags in memory a filter cannot read, so it is
// refused as a whole with ENOSYS, which makes glibc's pthread_create (in
// a cgo build) and any other caller fall back to clone.
var CloneNamespaceFlags = []uint64{
	0x00020000, // CLONE_NEWNS
	0x02000000, // CLONE_NEWCGROUP
	0x04000000, // CLONE_NEWUTS
	0x08000000, // CLONE_NEWIPC
	0x10000000, // CLONE_NEWUSER
	0x20000000, // CLONE_NEWPID
	0x40000000, // CLONE_NEWNET
}

// Config says what the daemon still reads and writes after start. The
// zero value is the policy of a daemon that runs as one process.
type Config struct {
	// Role is the process the policy is for.
	Role Role
	// SocketDir holds the UAPI socket, removed at exit.
	SocketDir string
	// LinkDir holds the socket's second name (awg(8)'s directory),
	// removed at exit too.
	LinkDir string
	// WriteFiles are files the daemon creates later (a heap profile
	// written at exit): their directories may gain new files.
	WriteFiles []string
}

// ReadDirs are directories the daemon reads below after start:
//
//   - /proc: /proc/stat (the GOMAXPROCS controller, metrics), the
//     process's own stat, status and fd (metrics), and
//     /proc/thread-self/ns/net (tun, to come back from the interface's
//     namespace). A rule on /proc/self would be narrower but does not
//     hold: procfs makes a new inode for /proc/PID whenever its dentry is
//     looked up again after the kernel dropped it, and Landlock rules are
//     tied to inodes, so the daemon would lose its own /proc entries under
//     memory pressure. Without CAP_SYS_PTRACE and CAP_DAC_OVERRIDE what
//     it can read there of other processes is what any root process of
//     the same owner can.
//
//   - /usr/lib, /usr/lib64, /lib, /lib64: the NSS modules glibc loads on
//     first use when the Go resolver hands a lookup to getaddrinfo (a cgo
//     build does when nsswitch.conf names a source Go does not know:
//     mdns4_minimal, resolve, myhostname on desktop distributions).
//     Without them those sources would fail quietly. Reading system
//     libraries reveals nothing.
//
// Where the ReadFiles point out of /etc (systemd-resolved's
// /run/systemd/resolve) is added by ReadPaths.
var ReadDirs = []string{"/proc", "/usr/lib", "/usr/lib64", "/lib", "/lib64"}

// ReadFiles are the files in /etc the daemon reads after start: the Go
// resolver's (re-read when they change, for endpoints that follow a host
// name), glibc's in a cgo build (gai.conf, host.conf, ld.so.cache for the
// NSS modules), and the service and protocol names. The rest of /etc
// (shadow, keys, other daemons' configuration) stays out of reach: the
// daemon is root, which owns those files, so file permissions would not
// stop it.
//
// That is for a daemon that runs as root in one process (Whole); the
// worker of a separated daemon is not root, so file modes protect those
// secrets from it, and it may read all of /etc.
//
// The price: Landlock rules are tied to inodes, so a file in /etc
// replaced by rename (dhclient rewriting resolv.conf, an editor saving
// hosts) is no longer readable, and the resolver falls back to its
// defaults until the daemon restarts. A resolv.conf kept outside /etc
// behind a link (systemd-resolved, resolvconf) is not affected: its
// directory is granted whole.
var ReadFiles = []string{
	"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/gai.conf",
	"/etc/host.conf", "/etc/services", "/etc/protocols", "/etc/ld.so.cache",
}

// ResolverSocketDirs hold the Unix sockets glibc's resolver connects to
// in a cgo build: nscd's, and systemd-resolved's varlink socket that
// nss-resolve uses. Landlock ABI 9 restricts connecting to named Unix
// sockets; these may be connected to, no others (a compromised daemon
// cannot reach, say, a container runtime's socket).
var ResolverSocketDirs = []string{"/run/systemd/resolve", "/run/nscd"}

// ReadPaths are the directories to grant reading below: ReadDirs, and the
// directories of the ReadFiles' link targets outside /etc
// (systemd-resolved's /run/systemd/resolve/stub-resolv.conf), where the
// file is replaced by rename. evalSymlinks is filepath.EvalSymlinks but
// in tests.
func ReadPaths(evalSymlinks func(string) (string, error)) (dirs []string) {
	dirs = append(dirs, ReadDirs...)
	for _, f := range ReadFiles {
		t, err := evalSymlinks(f)
		if err != nil || t == f || strings.HasPrefix(t, "/etc/") {
			continue
		}
		if d := filepath.Dir(t); !contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// WriteDirs are the directories the daemon may remove files from (its
// socket) and create files in (profiles): the socket directory and the
// WriteFiles' directories.
func (c Config) WriteDirs() []string {
	var dirs []string
	for _, d := range []string{c.SocketDir, c.LinkDir} {
		if d != "" && !contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	for _, f := range c.WriteFiles {
		if d := filepath.Dir(f); !contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Status says which protections are in force.
type Status struct {
	Off         bool   // turned off by the user
	Unsupported bool   // not Linux
	Caps        string // capabilities kept (comma-separated), "" if not dropped
	NoNewPrivs  bool
	Seccomp     bool
	Landlock    int      // ABI version enforced; 0: none
	Scoped      bool     // Landlock's signal and abstract Unix socket scopes (ABI 6)
	ScopedUnix  bool     // the abstract Unix socket scope alone (a rootless mode that signals its namespace child)
	UnixSockets string   // "landlock" (confined, ABI 9), "refused" (seccomp), "" (open)
	UID         int      // the process's user
	Problems    []string // what could not be applied, and why
}

// String is the one line the start-up log and `fips-go show` print:
// "caps=net_admin,net_bind_service no_new_privs seccomp landlock=v7
// scoped=signal,abstract_unix unix_sockets=refused uid=61234", with what
// is missing named.
func (s Status) String() string {
	switch {
	case s.Off:
		return "off"
	case s.Unsupported:
		return "unsupported on this system"
	}
	var parts []string
	if s.Caps != "" {
		parts = append(parts, "caps="+s.Caps)
	} else {
		parts = append(parts, "caps not dropped")
	}
	if s.NoNewPrivs {
		parts = append(parts, "no_new_privs")
	}
	if s.Seccomp {
		parts = append(parts, "seccomp")
	} else {
		parts = append(parts, "no seccomp")
	}
	if s.Landlock > 0 {
		parts = append(parts, fmt.Sprintf("landlock=v%d", s.Landlock))
	} else {
		parts = append(parts, "landlock unavailable")
	}
	if s.Scoped {
		parts = append(parts, "scoped=signal,abstract_unix")
	} else if s.ScopedUnix {
		parts = append(parts, "scoped=abstract_unix")
	}
	if s.UnixSockets != "" {
		parts = append(parts, "unix_sockets="+s.UnixSockets)
	}
	parts = append(parts, fmt.Sprintf("uid=%d", s.UID))
	return strings.Join(parts, " ")
}
