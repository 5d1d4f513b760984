package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"
)

// ApplyRootless turns the rootless policy on for every OS thread of the
// process, for good: every capability dropped (there are none unless
// root started the mode), then no_new_privs, Landlock and seccomp. A step
// the kernel does not allow is left out and named in Status.Problems; the
// others still apply.
func ApplyRootless(c RootlessConfig) Status {
	st := Status{UID: os.Getuid()}
	_ = time.Local.String() // as in Apply: /etc/localtime is hidden next
	if err := dropAllCaps(); err != nil {
		st.Problems = append(st.Problems, "capabilities: "+err.Error())
	} else {
		st.Caps = "none"
	}
	if err := allThreadsPrctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0); err != nil {
		st.Problems = append(st.Problems, "no_new_privs: "+err.Error())
	} else {
		st.NoNewPrivs = true
	}
	if v, err := restrictRootless(c); err != nil {
		st.Problems = append(st.Problems, "landlock: "+err.Error())
	} else {
		st.Landlock = v
		st.Scoped = v >= 6 && c.Child == 0
		st.ScopedUnix = v >= 6 && c.Child != 0
	}
	unixOK := st.Landlock >= 9
	p, err := rootlessSeccompPolicy(unixOK, os.Getpid(), c.Child)
	if err == nil {
		err = loadFilters(p)
	}
	if err != nil {
		st.Problems = append(st.Problems, "seccomp: "+err.Error())
	} else {
		st.Seccomp = true
		st.UnixSockets = "refused"
	}
	if unixOK {
		st.UnixSockets = "landlock"
	}
	checkThreads(&st, 0)
	return st
}

// dropAllCaps empties every capability set of a process root started:
// a rootless mode uses none. For an ordinary user it only clears the
// (already empty) sets; the bounding set then stays, and no_new_privs
// and the refused exec keep anything from being gained through it.
func dropAllCaps() error {
	hdr := &unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := new([2]unix.CapUserData)
	if err := unix.Capget(hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	permitted := uint64(data[0].Permitted) | uint64(data[1].Permitted)<<32
	if permitted&(1<<capSetPCAP) != 0 {
		for c := 0; ; c++ {
			if _, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err != nil {
				break
			}
			if err := allThreadsPrctl(unix.PR_CAPBSET_DROP, uintptr(c), 0); err != nil {
				return fmt.Errorf("bounding set, capability %d: %w", c, err)
			}
		}
	}
	if err := allThreadsPrctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("ambient set: %w", err)
	}
	*data = [2]unix.CapUserData{}
	_, _, e := psx.Syscall3(unix.SYS_CAPSET, uintptr(unsafe.Pointer(hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
	runtime.KeepAlive(hdr)
	runtime.KeepAlive(data)
	if e != 0 {
		return fmt.Errorf("capset: %w", e)
	}
	return nil
}

// restrictRootless applies the Landlock rules: reading the config file,
// the resolver's files (ReadFiles) and below ReadPaths (/proc: the owner
// check's /proc/net tables and the process's own entries; Landlock keeps
// other processes' ptrace-guarded entries, such as environ, mem and fd,
// out of reach), connecting to the resolver's Unix sockets (ABI 9),
// removing the UAPI socket, writing the WriteFiles, nothing else; and
// (ABI 6) no connecting to abstract Unix sockets and, without a child to
// signal, no signals to processes outside the sandbox. It returns the ABI
// version the kernel enforces.
func restrictRootless(c RootlessConfig) (int, error) {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		return 0, errors.New("the kernel has no Landlock (or it is not enabled in lsm=)")
	}
	rules := []landlock.Rule{
		landlock.RODirs(ReadPaths(filepath.EvalSymlinks)...).IgnoreIfMissing(),
		landlock.ROFiles(append(append([]string(nil), ReadFiles...), c.ReadFiles...)...).IgnoreIfMissing(),
		landlock.PathAccess(llsys.AccessFSResolveUnix, ResolverSocketDirs...).IgnoreIfMissing(),
	}
	if c.SocketDir != "" {
		rules = append(rules, landlock.PathAccess(llsys.AccessFSRemoveFile|llsys.AccessFSReadDir, c.SocketDir))
	}
	if len(c.WriteFiles) > 0 {
		rules = append(rules, landlock.RWFiles(c.WriteFiles...))
	}
	scoped := landlock.V9.Scoped
	if c.Child != 0 {
		scoped = llsys.ScopeAbstractUnixSocket
	}
	cfg := landlock.Config{HandledAccessFS: landlock.V9.HandledAccessFS, Scoped: scoped}
	if err := cfg.BestEffort().Restrict(rules...); err != nil {
		return 0, err
	}
	return min(abi, 9), nil
}

// rootlessSeccompPolicy is the rootless filter for the running
// architecture: Deny and RootlessDenyExtra refused, clone with namespace
// flags, the SelfOnly calls aimed at another process (child, when not 0,
// counts as self for kill), pidfd_send_signal with a signal, and sockets
// of other families or netlink protocols answered EPERM; clone3 ENOSYS.
// As in seccompPolicy, every condition refuses on inequality on all 64
// bits.
func rootlessSeccompPolicy(unixOK bool, pid, child int) (*seccomp.Policy, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range append(append([]string(nil), Deny...), RootlessDenyExtra...) {
		if _, ok := info.SyscallNames[n]; ok {
			names = append(names, n)
		}
	}
	conds := processConditions(info, pid, child)
	conds = append(conds, rootlessSocketConditions(unixOK)...)
	return policyOf(names, conds), nil
}

// rootlessSocketConditions refuse socket() for a family other than those
// a rootless mode uses, and netlink for a protocol not in RootlessNetlink.
func rootlessSocketConditions(unixOK bool) []seccomp.NameWithConditions {
	families := []uint64{AFInet, AFInet6, AFNetlink}
	if unixOK {
		families = append(families, AFUnix)
	}
	var other seccomp.ArgumentConditions
	for _, f := range families {
		other = append(other, seccomp.Condition{Argument: 0, Operation: seccomp.NotEqual, Value: f})
	}
	nl := seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.Equal, Value: AFNetlink}}
	for _, p := range RootlessNetlink {
		nl = append(nl, seccomp.Condition{Argument: 2, Operation: seccomp.NotEqual, Value: p})
	}
	return []seccomp.NameWithConditions{
		{Name: "socket", Conditions: other},
		{Name: "socket", Conditions: nl},
	}
}
