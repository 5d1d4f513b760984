package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The rootless probe: a copy of this test binary runs as an ordinary user
// (nobody when the test is root), against targets of that same user's: a
// secret file, a Unix socket by path and an abstract one, a process to
// signal and whose environment to read, and a program to run. Without the
// sandbox (the control run) every attack works, which shows the targets
// are real; under ApplyRootless every one fails while what a rootless
// mode does after start still works.

const rootlessProbeEnv = "FIPS_GO_ROOTLESS_PROBE"

// rootlessProbe is what the child is told.
type rootlessProbe struct {
	Mode     string // "control", "netstack" or "command"
	Config   string // the mode's config file, readable
	Secret   string // another file of the user's
	SockDir  string // the UAPI socket directory, holding Socket
	Socket   string
	Profile  string // a heap profile to write
	UserSock string // another program's Unix socket
	Abstract string // and an abstract one ("@...")
	Other    int    // another process of the user's
	Child    int    // the namespace child ("command" mode)
}

func TestRootlessProbe(t *testing.T) {
	if os.Getenv(rootlessProbeEnv) != "" {
		rootlessChild(t)
		return
	}
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		uid, gid = 65534, 65534 // nobody, as the rootless e2e tests
	}
	dir, err := os.MkdirTemp("", "fips-go-rootless-probe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	own := func(p string, mode os.FileMode) {
		t.Helper()
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	own(dir, 0o755)
	bin := filepath.Join(dir, "probe.test")
	copyFile(t, os.Args[0], bin)
	own(bin, 0o755)
	p := rootlessProbe{
		Config: filepath.Join(dir, "wg0.conf"), Secret: filepath.Join(dir, "id_ed25519"),
		SockDir: filepath.Join(dir, "run"), Profile: filepath.Join(dir, "heap.fipsgo0"),
		UserSock: filepath.Join(dir, "agent.sock"),
		Abstract: fmt.Sprintf("@fips-go-rootless-probe-%d", os.Getpid()),
	}
	p.Socket = filepath.Join(p.SockDir, "fipsgo0.sock")
	for _, f := range []string{p.Config, p.Secret, p.Profile} {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		own(f, 0o600)
	}
	if err := os.Mkdir(p.SockDir, 0o700); err != nil {
		t.Fatal(err)
	}
	own(p.SockDir, 0o700)
	for _, name := range []string{p.UserSock, p.Abstract} {
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
	}
	own(p.UserSock, 0o600)
	p.Other = startAs(t, uid, gid)
	p.Child = startAs(t, uid, gid)

	for _, mode := range []string{"control", "netstack", "command"} {
		p.Mode = mode
		// The socket is removed by each run.
		if err := os.WriteFile(p.Socket, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		own(p.Socket, 0o600)
		out := runRootlessChild(t, bin, p, uid, gid)
		checkRootlessChild(t, mode, out)
		for _, pid := range []int{p.Other, p.Child} {
			if st := procState(pid); st != "S" {
				t.Errorf("%s: process %d is %q after the run, want sleeping", mode, pid, st)
			}
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// startAs starts a sleeping process of uid's and returns its pid.
func startAs(t *testing.T, uid, gid int) int {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	cmd.Env = []string{"SECRET=in-the-environment"}
	if uid != os.Getuid() {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// procState is the state letter of pid ("S" sleeping, "Z" killed but not
// reaped), "" when it cannot be read.
func procState(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if _, after, ok := strings.Cut(string(b), ") "); ok && after != "" {
		return after[:1]
	}
	return ""
}

func runRootlessChild(t *testing.T, bin string, p rootlessProbe, uid, gid int) string {
	t.Helper()
	js, _ := json.Marshal(p)
	cmd := exec.Command(bin, "-test.run=^TestRootlessProbe$", "-test.count=1", "-test.v")
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), rootlessProbeEnv + "=" + string(js)}
	if uid != os.Getuid() {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	}
	out, err := cmd.CombinedOutput()
	t.Logf("%s child:\n%s", p.Mode, out)
	if err != nil {
		t.Fatalf("%s child: %v", p.Mode, err)
	}
	return string(out)
}

// checkRootlessChild reads the child's report: in the control run every
// attack worked, under the sandbox none did, and every need was met.
func checkRootlessChild(t *testing.T, mode, out string) {
	t.Helper()
	attacks, needs := 0, 0
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "attack "):
			attacks++
			worked := strings.HasSuffix(line, ": worked")
			if mode == "control" && !worked {
				t.Errorf("control run, without the sandbox: %s (the target is not reachable, so the test shows nothing)", line)
			}
			if mode != "control" && worked {
				t.Errorf("%s sandbox: %s", mode, line)
			}
		case strings.HasPrefix(line, "need "):
			needs++
			if !strings.HasSuffix(line, ": ok") {
				t.Errorf("%s: %s", mode, line)
			}
		case strings.HasPrefix(line, "problem: "), strings.HasPrefix(line, "status: ") && mode == "control":
			t.Errorf("%s: %s", mode, line)
		}
	}
	if attacks < len(rootlessAttacks(rootlessProbe{})) || needs == 0 {
		t.Fatalf("%s: the child reported %d attacks and %d needs", mode, attacks, needs)
	}
}

// rootlessChild runs in the copy: it applies the sandbox (but in the
// control run) and reports each attack and each need.
func rootlessChild(t *testing.T) {
	var p rootlessProbe
	if err := json.Unmarshal([]byte(os.Getenv(rootlessProbeEnv)), &p); err != nil {
		t.Fatal(err)
	}
	if p.Mode != "control" {
		c := RootlessConfig{ReadFiles: []string{p.Config}, SocketDir: p.SockDir, WriteFiles: []string{p.Profile}}
		if p.Mode == "command" {
			c.Child = p.Child
		}
		st := ApplyRootless(c)
		fmt.Printf("status: %s\n", st)
		for _, pr := range st.Problems {
			fmt.Printf("problem: %s\n", pr)
		}
		if !st.NoNewPrivs || !st.Seccomp || st.Caps != "none" {
			fmt.Printf("problem: status %+v\n", st)
		}
	}
	for _, a := range rootlessAttacks(p) {
		if err := a.do(); err != nil {
			fmt.Printf("attack %s: refused: %v\n", a.name, err)
		} else {
			fmt.Printf("attack %s: worked\n", a.name)
		}
	}
	for _, n := range rootlessNeeds(p) {
		if err := n.do(); err != nil {
			fmt.Printf("need %s: %v\n", n.name, err)
		} else {
			fmt.Printf("need %s: ok\n", n.name)
		}
	}
}

type probeStep struct {
	name string
	do   func() error
}

// rootlessAttacks are what a compromised rootless mode would try against
// its own user.
func rootlessAttacks(p rootlessProbe) []probeStep {
	return []probeStep{
		{"read another file of the user's", func() error { _, err := os.ReadFile(p.Secret); return err }},
		{"connect to the user's Unix socket", func() error { return dialUnix(p.UserSock) }},
		{"connect to an abstract Unix socket", func() error { return dialUnix(p.Abstract) }},
		{"signal another process of the user's", func() error { return unix.Kill(p.Other, unix.SIGCONT) }},
		{"signal it through its /proc directory", func() error { return pidfdSignal(p.Other) }},
		{"read its environment", func() error { _, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.Other)); return err }},
		{"run a program", func() error {
			// Pipes, not /dev/null (which Landlock hides): execve
			// itself must be what fails.
			cmd := exec.Command("/bin/true")
			cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(""), io.Discard, io.Discard
			return cmd.Run()
		}},
	}
}

func dialUnix(path string) error {
	c, err := net.Dial("unix", path)
	if err == nil {
		c.Close()
	}
	return err
}

// pidfdSignal signals pid through a descriptor of its /proc directory,
// which pidfd_send_signal takes as a pidfd.
func pidfdSignal(pid int) error {
	fd, err := unix.Open(fmt.Sprintf("/proc/%d", pid), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.PidfdSendSignal(fd, unix.SIGCONT, nil, 0)
}

// rootlessNeeds are what the modes do after start.
func rootlessNeeds(p rootlessProbe) []probeStep {
	needs := []probeStep{
		{"read the config file", func() error { _, err := os.ReadFile(p.Config); return err }},
		{"read /etc/hosts", func() error { return readIfExists("/etc/hosts") }},
		{"read /etc/resolv.conf", func() error { return readIfExists("/etc/resolv.conf") }},
		{"read /proc/net/tcp", func() error { _, err := os.ReadFile("/proc/net/tcp"); return err }},
		{"read /proc/self/status", func() error { _, err := os.ReadFile("/proc/self/status"); return err }},
		{"list /proc/self/fd", func() error { _, err := os.ReadDir("/proc/self/fd"); return err }},
		{"socket diagnostics netlink", func() error { return openSocket(unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_SOCK_DIAG) }},
		{"route netlink", func() error { return openSocket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE) }},
		{"UDP socket", func() error { return openSocket(unix.AF_INET6, unix.SOCK_DGRAM, 0) }},
		{"TCP listener on loopback", func() error {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err == nil {
				ln.Close()
			}
			return err
		}},
		{"signal itself", func() error { return unix.Kill(os.Getpid(), 0) }},
		{"write the profile", func() error { return os.WriteFile(p.Profile, []byte("profile"), 0o600) }},
		{"remove the UAPI socket", func() error { return os.Remove(p.Socket) }},
	}
	if p.Mode == "command" {
		needs = append(needs, probeStep{"signal the namespace child", func() error { return unix.Kill(p.Child, unix.SIGCONT) }})
	}
	if p.Mode != "control" {
		// Refused under the sandbox only: no target is needed to show it.
		needs = append(needs, probeStep{"refuse other netlink and packet sockets", func() error {
			for _, s := range [][3]int{{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_NETFILTER}, {unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT}, {unix.AF_PACKET, unix.SOCK_DGRAM, 0}, {unix.AF_VSOCK, unix.SOCK_STREAM, 0}} {
				if err := openSocket(s[0], s[1], s[2]); !errors.Is(err, unix.EPERM) {
					return fmt.Errorf("socket%v: %v, want EPERM", s, err)
				}
			}
			return nil
		}})
	}
	return needs
}

func readIfExists(path string) error {
	_, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

func openSocket(family, typ, proto int) error {
	fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// The rootless filter assembles, refuses no call a rootless mode makes
// (the daemon's setns aside), and keeps setns out.
func TestRootlessPolicy(t *testing.T) {
	for _, unixOK := range []bool{false, true} {
		p, err := rootlessSeccompPolicy(unixOK, os.Getpid(), os.Getpid()+1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Assemble(); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range append(slices.Clone(Deny), RootlessDenyExtra...) {
		if slices.Contains(used, n) && n != "setns" {
			t.Errorf("the rootless filter refuses %s, which the modes make", n)
		}
	}
	if NetlinkSockDiag != unix.NETLINK_SOCK_DIAG {
		t.Errorf("NetlinkSockDiag %d, want %d", NetlinkSockDiag, unix.NETLINK_SOCK_DIAG)
	}
	if got := (Status{Caps: "none", NoNewPrivs: true, Seccomp: true, Landlock: 7, ScopedUnix: true, UnixSockets: "refused", UID: 1000}).String(); got != "caps=none no_new_privs seccomp landlock=v7 scoped=abstract_unix unix_sockets=refused uid=1000" {
		t.Errorf("status %q", got)
	}
}
