package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompPolicy is the filter for the running architecture and role r:
// Deny, setns (the worker) or setns but for network namespaces (the
// others), clone with namespace flags, the SelfOnly
// calls aimed at another process (self is pid), pidfd_send_signal with a
// signal, and sockets of other families (AF_UNIX too unless unixOK)
// answered EPERM, and clone3 ENOSYS.
//
// Every condition refuses on inequality to what is allowed, compared on
// all 64 bits: an argument the kernel reads as a 32-bit int with junk in
// its upper half differs from every allowed value and is refused too.
func seccompPolicy(r Role, unixOK bool, pid int) (*seccomp.Policy, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range Deny {
		if _, ok := info.SyscallNames[n]; ok {
			names = append(names, n)
		}
	}
	if r == Worker {
		names = append(names, "setns")
	}
	conds := []seccomp.NameWithConditions{{
		Name: "setns",
		Conditions: seccomp.ArgumentConditions{{
			Argument: 1, Operation: seccomp.NotEqual, Value: DenySetnsExcept,
		}},
	}}
	conds = append(conds, processConditions(info, pid, 0)...)
	conds = append(conds, socketConditions(unixOK)...)
	return policyOf(names, conds), nil
}

// processConditions refuse what would reach another process or make
// namespaces: pidfd_send_signal with a signal (signal 0 only asks whether
// a process exists; Go's os package probes pidfd support with it), clone
// with namespace flags, and the SelfOnly calls aimed at a pid other than
// self (or child, when not 0: kill only).
func processConditions(info *arch.Info, self, child int) []seccomp.NameWithConditions {
	conds := []seccomp.NameWithConditions{{
		Name:       "pidfd_send_signal",
		Conditions: seccomp.ArgumentConditions{{Argument: 1, Operation: seccomp.NotEqual, Value: 0}},
	}}
	for _, f := range CloneNamespaceFlags {
		conds = append(conds, seccomp.NameWithConditions{
			Name:       "clone",
			Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: f}},
		})
	}
	for _, c := range SelfOnly {
		if _, ok := info.SyscallNames[c.Name]; !ok {
			continue
		}
		notSelf := seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.NotEqual, Value: uint64(self)}}
		if c.ZeroIsSelf {
			notSelf = append(notSelf, seccomp.Condition{Argument: 0, Operation: seccomp.NotEqual, Value: 0})
		}
		if c.Name == "kill" && child > 0 {
			notSelf = append(notSelf, seccomp.Condition{Argument: 0, Operation: seccomp.NotEqual, Value: uint64(child)})
		}
		conds = append(conds, seccomp.NameWithConditions{Name: c.Name, Conditions: notSelf})
	}
	return conds
}

// policyOf is the filter: names refused, conds refused when they hold
// (both EPERM), and clone3 answered ENOSYS so that the runtime falls back
// to clone, whose flags the filter can see.
func policyOf(names []string, conds []seccomp.NameWithConditions) *seccomp.Policy {
	return &seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Names: names, Action: seccomp.ActionErrno}, // EPERM
			{NamesWithCondtions: conds, Action: seccomp.ActionErrno},
			// An action other than the bare ActionErrno keeps its own
			// errno in go-seccomp-bpf.
			{Names: []string{"clone3"}, Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)},
		},
	}
}

// socketConditions refuse socket() for a family other than those the
// daemon uses, and netlink for a protocol other than route.
func socketConditions(unixOK bool) []seccomp.NameWithConditions {
	families := []uint64{AFInet, AFInet6, AFNetlink}
	if unixOK {
		families = append(families, AFUnix)
	}
	var other seccomp.ArgumentConditions
	for _, f := range families {
		other = append(other, seccomp.Condition{Argument: 0, Operation: seccomp.NotEqual, Value: f})
	}
	return []seccomp.NameWithConditions{
		{Name: "socket", Conditions: other},
		{Name: "socket", Conditions: seccomp.ArgumentConditions{
			{Argument: 0, Operation: seccomp.Equal, Value: AFNetlink},
			{Argument: 2, Operation: seccomp.NotEqual, Value: NetlinkRoute},
		}},
	}
}

// guardProgram is the first filter, ours: it answers ENOSYS to any
// system call made through another architecture's calling convention
// (the 32-bit int 0x80 entry on amd64: a deny list keyed on 64-bit
// numbers would not see those), and EPERM to the terminal ioctls that
// type into a terminal or reach the console (TIOCSTI, TIOCLINUX).
// go-seccomp-bpf compares arguments on 64 bits, and the kernel reads an
// ioctl's request as 32: the request is compared here on its low half,
// so that junk in the upper one does not get it past.
func guardProgram(info *arch.Info) ([]bpf.RawInstruction, error) {
	ioctl, ok := info.SyscallNames["ioctl"]
	if !ok {
		return nil, fmt.Errorf("no ioctl on %s", info.Name)
	}
	// seccomp_data: nr at 0, arch at 4, instruction pointer at 8, args
	// from 16, each 64 bits in the machine's byte order.
	reqLow := uint32(16 + 8)
	if !littleEndian() {
		reqLow += 4
	}
	const eperm = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	return bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		bpf.LoadAbsolute{Off: 0, Size: 4}, // nr
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(ioctl), SkipFalse: 3},
		bpf.LoadAbsolute{Off: reqLow, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.TIOCSTI, SkipTrue: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.TIOCLINUX, SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
		bpf.RetConstant{Val: eperm},
	})
}

func littleEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}

// loadSeccomp installs, on all threads (TSYNC), first the guard, then the
// policy. go-seccomp-bpf lets other architectures through to the default
// action, which is why the guard is a filter of its own.
func loadSeccomp(r Role, unixOK bool, pid int) error {
	p, err := seccompPolicy(r, unixOK, pid)
	if err != nil {
		return err
	}
	return loadFilters(p)
}

// loadFilters installs the guard and then p, on all threads.
func loadFilters(p *seccomp.Policy) error {
	info, err := arch.GetInfo("")
	if err != nil {
		return err
	}
	guard, err := guardProgram(info)
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(guard))
	for i, in := range guard {
		filter[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	prog := &unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	// no_new_privs is set already (seccomp wants it, or CAP_SYS_ADMIN).
	// With TSYNC a positive return is a thread that could not be synced,
	// and then no thread has the filter.
	if tid, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(prog))); e != 0 || tid != 0 {
		return fmt.Errorf("guard filter: errno %v, thread %d", e, tid)
	}
	runtime.KeepAlive(filter)
	return seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Flag: seccomp.FilterFlagTSync, Policy: *p})
}
