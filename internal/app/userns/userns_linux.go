package userns

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// setupTimeout bounds how long the child may take to hand the TUN back.
const setupTimeout = 20 * time.Second

// Session is a command running in its namespace. The caller serves TUN,
// calls Go to let the command start, and Wait for its end.
type Session struct {
	// TUN is the namespace's TUN descriptor; the caller owns it.
	TUN int

	cmd    *exec.Cmd
	ctl    *net.UnixConn
	resolv string // temporary resolv.conf to remove; "" for none

	// Signals go to the child by pid (kill), not through its pidfd as
	// os.Process sends them: the rootless sandbox lets kill reach this
	// one pid and refuses pidfd_send_signal, which takes any process's
	// /proc directory as well. exited, set once the child has exited and
	// before it is reaped, keeps a reused pid from being signalled.
	mu     sync.Mutex
	exited bool // guarded by mu
}

// Start creates the namespaces and the TUN; the command waits for Go.
func Start(o Options) (*Session, error) {
	if err := o.normalize(); err != nil {
		return nil, err
	}
	path, err := exec.LookPath(o.Args[0])
	if err != nil {
		return nil, fmt.Errorf("userns: %w", err)
	}
	s := &Session{TUN: -1}
	sp := spec{Name: o.Name, MTU: o.MTU, Addresses: o.Addresses, Routes: o.Routes,
		UID: os.Getuid(), GID: os.Getgid(), Path: path}
	if len(o.DNS) > 0 || len(o.DNSSearch) > 0 {
		if sp.Resolv, err = writeResolv(ResolvConf(o.DNS, o.DNSSearch)); err != nil {
			return nil, err
		}
		s.resolv = sp.Resolv
	}
	if err := s.start(o, sp); err != nil {
		s.cleanup()
		return nil, err
	}
	// The child bind-mounted the resolv.conf before it sent the TUN: the
	// file goes now, while the caller may still remove it (a sandboxed
	// caller could not at the end).
	if s.resolv != "" {
		os.Remove(s.resolv)
		s.resolv = ""
	}
	return s, nil
}

func writeResolv(text string) (string, error) {
	f, err := os.CreateTemp("", "fips-go-resolv-*.conf")
	if err != nil {
		return "", fmt.Errorf("userns: resolv.conf: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("userns: resolv.conf: %w", err)
	}
	f.Chmod(0o644)
	return f.Name(), nil
}

func (s *Session) start(o Options, sp spec) error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("userns: socketpair: %w", err)
	}
	childEnd := os.NewFile(uintptr(fds[1]), "userns-control")
	defer childEnd.Close()
	if s.ctl, err = controlConn(fds[0]); err != nil {
		unix.Close(fds[0])
		return err
	}
	js, _ := json.Marshal(sp)
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = append([]string{"fips-go(userns)"}, o.Args...)
	cmd.Env = append(os.Environ(), ChildEnv+"="+string(js))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.Stdin, o.Stdout, o.Stderr
	if cmd.Stdin == nil {
		cmd.Stdin = os.Stdin
	}
	if cmd.Stdout == nil {
		cmd.Stdout = os.Stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	cmd.ExtraFiles = []*os.File{childEnd}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:                 unix.CLONE_NEWUSER | unix.CLONE_NEWNET | unix.CLONE_NEWNS,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		GidMappingsEnableSetgroups: false,
		Pdeathsig:                  unix.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return unavailable(fmt.Errorf("userns: create user and network namespace: %w", err))
	}
	s.cmd = cmd
	childEnd.Close()
	return s.receiveTUN()
}

// receiveTUN reads the child's reply and the TUN descriptor with it.
func (s *Session) receiveTUN() error {
	s.ctl.SetReadDeadline(time.Now().Add(setupTimeout))
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := s.ctl.ReadMsgUnix(buf, oob)
	s.ctl.SetReadDeadline(time.Time{})
	if err != nil || n == 0 {
		return s.childFailed(fmt.Errorf("userns: no answer from the namespace: %v", err))
	}
	if oobn > 0 {
		if cmsgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil && len(cmsgs) == 1 {
			if fds, perr := unix.ParseUnixRights(&cmsgs[0]); perr == nil && len(fds) == 1 {
				s.TUN = fds[0]
			}
		}
	}
	var r reply
	if err := json.Unmarshal(buf[:n], &r); err != nil {
		return s.childFailed(fmt.Errorf("userns: bad answer from the namespace: %w", err))
	}
	if r.Err != "" {
		return s.childFailed(unavailable(fmt.Errorf("userns: setting up the namespace: %s", r.Err)))
	}
	if s.TUN < 0 {
		return s.childFailed(errors.New("userns: the namespace sent no TUN"))
	}
	return nil
}

// unavailable adds the kernel setting or policy to blame, if one is known.
func unavailable(err error) error {
	if why := Diagnose(readFile); why != "" {
		return fmt.Errorf("%w: %w: %s", err, ErrUnavailable, why)
	}
	return err
}

func readFile(p string) (string, error) {
	b, err := os.ReadFile(p)
	return string(b), err
}

func (s *Session) childFailed(err error) error {
	s.cmd.Process.Kill()
	s.cmd.Wait()
	return err
}

// Go lets the command start: call it once the TUN is served.
func (s *Session) Go() error {
	_, err := s.ctl.Write([]byte{'g'})
	return err
}

// Pid is the child's process id, which signals go to.
func (s *Session) Pid() int { return s.cmd.Process.Pid }

// Signal passes sig on to the command.
func (s *Session) Signal(sig os.Signal) error {
	n, ok := sig.(syscall.Signal)
	if !ok {
		return fmt.Errorf("userns: %v is not a Unix signal", sig)
	}
	return s.signal(n)
}

func (s *Session) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exited {
		return os.ErrProcessDone
	}
	return unix.Kill(s.cmd.Process.Pid, sig)
}

// waitExited waits until the child has exited, without reaping it, and
// marks it so.
func (s *Session) waitExited() {
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, s.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
	s.mu.Lock()
	s.exited = true
	s.mu.Unlock()
}

// Wait waits for the command and returns its exit status as a shell
// reports it (128+N for signal N).
func (s *Session) Wait() int {
	s.waitExited()
	err := s.cmd.Wait()
	s.cleanup()
	return exitCode(s.cmd.ProcessState, err)
}

// Abort ends the namespace before or instead of Go.
func (s *Session) Abort() {
	s.signal(unix.SIGKILL)
	s.waitExited()
	s.cmd.Wait()
	s.cleanup()
}

func (s *Session) cleanup() {
	if s.ctl != nil {
		s.ctl.Close()
	}
	if s.resolv != "" {
		os.Remove(s.resolv)
		s.resolv = ""
	}
}
