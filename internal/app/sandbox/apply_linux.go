package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"
)

// Apply turns the policy on for every OS thread of the process, for good:
// capabilities, then no_new_privs, Landlock and seccomp. A step the
// kernel or the process's privileges do not allow is left out and named
// in Status.Problems; the others still apply.
//
// Capabilities and prctl settings are per thread in Linux, and the Go
// runtime has several threads by now: they change on all of them through
// libcap's psx, which signals every thread to make the same system call
// (syscall.AllThreadsSyscall does this too, but only in binaries without
// cgo, and the default Linux build links cgo for the net package's
// resolver). Landlock goes through go-landlock, which uses psx or the
// kernel's own TSYNC; seccomp through go-seccomp-bpf with TSYNC.
func Apply(c Config) Status {
	var st Status
	// The log's time zone is loaded on first use, from a file Landlock
	// would hide (/etc/localtime points into /usr/share/zoneinfo).
	_ = time.Local.String()
	st.UID = os.Getuid()
	if caps, err := dropCaps(c.Role); err != nil {
		st.Problems = append(st.Problems, "capabilities: "+err.Error())
	} else {
		st.Caps = caps
	}
	if err := allThreadsPrctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0); err != nil {
		st.Problems = append(st.Problems, "no_new_privs: "+err.Error())
	} else {
		st.NoNewPrivs = true
	}
	if v, err := restrictFiles(c); err != nil {
		st.Problems = append(st.Problems, "landlock: "+err.Error())
	} else {
		st.Landlock = v
		st.Scoped = v >= 6
	}
	// Unix sockets stay usable only where Landlock confines them.
	unixOK := st.Landlock >= 9
	if err := loadSeccomp(c.Role, unixOK, os.Getpid()); err != nil {
		st.Problems = append(st.Problems, "seccomp: "+err.Error())
	} else {
		st.Seccomp = true
		st.UnixSockets = "refused"
	}
	if unixOK {
		st.UnixSockets = "landlock"
	}
	checkThreads(&st, c.Role.Mask())
	return st
}

// checkThreads compares what every thread's /proc status says with st,
// and takes back what some thread lacks: the status reported is what the
// kernel shows, not what the calls returned.
func checkThreads(st *Status, keep uint64) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		st.Problems = append(st.Problems, "cannot check the threads: "+err.Error())
		return
	}
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			continue // ended meanwhile
		}
		f := map[string]string{}
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok {
				f[k] = strings.TrimSpace(v)
			}
		}
		if st.NoNewPrivs && f["NoNewPrivs"] != "1" {
			st.NoNewPrivs = false
			st.Problems = append(st.Problems, "thread "+task.Name()+" has no no_new_privs")
		}
		if st.Seccomp && f["Seccomp"] != "2" {
			st.Seccomp = false
			st.Problems = append(st.Problems, "thread "+task.Name()+" has no seccomp filter")
		}
		if eff, err := strconv.ParseUint(f["CapEff"], 16, 64); st.Caps != "" && (err != nil || eff&^keep != 0) {
			st.Caps = ""
			st.Problems = append(st.Problems, "thread "+task.Name()+" kept capabilities "+f["CapEff"])
		}
	}
}

func allThreadsPrctl(option int, arg2, arg3 uintptr) error {
	if _, _, e := psx.Syscall6(unix.SYS_PRCTL, uintptr(option), arg2, arg3, 0, 0, 0); e != 0 {
		return e
	}
	return nil
}

const capSetPCAP = 8 // CAP_SETPCAP: needed to shrink the bounding set

// dropCaps leaves the process with r's capabilities (as far as it has them) in its
// effective and permitted sets and nothing else anywhere: the
// inheritable and ambient sets cleared, every other capability out of the
// bounding set, and the securebits locked so that root gains nothing by
// exec either (which seccomp refuses anyway). It returns the names of the
// capabilities kept.
func dropCaps(r Role) (string, error) {
	hdr := &unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := new([2]unix.CapUserData)
	if err := unix.Capget(hdr, &data[0]); err != nil {
		return "", fmt.Errorf("capget: %w", err)
	}
	permitted := uint64(data[0].Permitted) | uint64(data[1].Permitted)<<32
	keep := r.Mask() & permitted
	if permitted&(1<<capSetPCAP) != 0 {
		// Without CAP_SETPCAP (the worker, or a daemon started with file
		// capabilities) the bounding set stays as the parent left it;
		// no_new_privs and the seccomp filter's exec refusal then stand
		// in for it.
		// linux/securebits.h: NOROOT, NO_SETUID_FIXUP, each with its
		// lock, and KEEP_CAPS locked off.
		const bits = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<5
		if err := allThreadsPrctl(unix.PR_SET_SECUREBITS, bits, 0); err != nil {
			return "", fmt.Errorf("securebits: %w", err)
		}
		if err := limitBounding(keep); err != nil {
			return "", err
		}
	}
	if err := allThreadsPrctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		// EINVAL: a kernel before 4.3, without ambient capabilities.
		return "", fmt.Errorf("ambient set: %w", err)
	}
	data[0] = unix.CapUserData{Effective: uint32(keep), Permitted: uint32(keep)}
	data[1] = unix.CapUserData{Effective: uint32(keep >> 32), Permitted: uint32(keep >> 32)}
	_, _, e := psx.Syscall3(unix.SYS_CAPSET, uintptr(unsafe.Pointer(hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
	runtime.KeepAlive(hdr)
	runtime.KeepAlive(data)
	if e != 0 {
		return "", fmt.Errorf("capset: %w", e)
	}
	var names []byte
	for _, c := range r.Caps() {
		if keep&(1<<c.Bit) != 0 {
			if len(names) > 0 {
				names = append(names, ',')
			}
			names = append(names, c.Name...)
		}
	}
	if len(names) == 0 {
		return "none", nil
	}
	return string(names), nil
}

// LimitBounding drops every capability but keep's from the bounding set
// of every thread: what a monitor does before it starts its worker, which
// cannot do it itself (it has no CAP_SETPCAP), so that the worker can
// never gain another capability. The capabilities the caller holds stay.
func LimitBounding(keep []Capability) error {
	var m uint64
	for _, c := range keep {
		m |= 1 << c.Bit
	}
	return limitBounding(m)
}

func limitBounding(keep uint64) error {
	for c := 0; ; c++ {
		// PR_CAPBSET_READ fails past the kernel's last capability.
		if _, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err != nil {
			return nil
		}
		if keep&(1<<c) != 0 {
			continue
		}
		if err := allThreadsPrctl(unix.PR_CAPBSET_DROP, uintptr(c), 0); err != nil {
			return fmt.Errorf("bounding set, capability %d: %w", c, err)
		}
	}
}

// restrictFiles applies the Landlock rules: reading ReadFiles and below
// ReadPaths, connecting to the resolver's Unix sockets (ABI 9), removing
// files from the socket directory (the UAPI socket at exit), creating and
// writing files in the WriteFiles' directories, nothing else; and (ABI 6)
// no signals to processes outside the daemon and no connecting to
// abstract Unix sockets. Network rules (ABI 4 and later) are not used:
// the daemon binds and connects wherever UAPI and DNS say. It returns
// the ABI version the kernel enforces, best effort down to version 1.
// The monitor gets /proc and the socket directory's rule only.
func restrictFiles(c Config) (int, error) {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		return 0, errors.New("the kernel has no Landlock (or it is not enabled in lsm=)")
	}
	// /proc for every role: checkThreads reads every thread's status
	// there, which the monitor needs as much as the others. Landlock
	// refuses it the /proc files of processes outside its domain that
	// ptrace rules guard (environ, mem, fd).
	rules := []landlock.Rule{landlock.RODirs("/proc")}
	if c.Role != Monitor {
		rules = append(rules,
			landlock.RODirs(ReadPaths(filepath.EvalSymlinks)...).IgnoreIfMissing(),
			landlock.PathAccess(llsys.AccessFSResolveUnix, ResolverSocketDirs...).IgnoreIfMissing())
	}
	switch c.Role {
	case Worker:
		// Not root: file modes keep /etc's secrets from it, and a rule on
		// the directory survives a resolver file replaced by rename.
		rules = append(rules, landlock.RODirs("/etc").IgnoreIfMissing())
	case Whole:
		rules = append(rules, landlock.ROFiles(ReadFiles...).IgnoreIfMissing())
	}
	for _, d := range []string{c.SocketDir, c.LinkDir} {
		if d != "" {
			rules = append(rules, landlock.PathAccess(llsys.AccessFSRemoveFile|llsys.AccessFSReadDir, d).IgnoreIfMissing())
		}
	}
	for _, d := range c.WriteDirs() {
		if d != c.SocketDir && d != c.LinkDir {
			rules = append(rules, landlock.RWDirs(d).IgnoreIfMissing())
		}
	}
	// V9 is the newest file-system ABI this go-landlock knows; BestEffort
	// narrows it to what the kernel has. Its network rights are left out
	// (see above), its scopes kept.
	cfg := landlock.Config{HandledAccessFS: landlock.V9.HandledAccessFS, Scoped: landlock.V9.Scoped}
	if err := cfg.BestEffort().Restrict(rules...); err != nil {
		return 0, err
	}
	return min(abi, 9), nil
}
