package userns

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// ctlFD is the child's end of the control socket (the first ExtraFile).
const ctlFD = 3

// forwarded are the signals passed on to the command.
var forwarded = []os.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH}

// ChildMain is the child process: it runs when IsChild and never returns;
// anywhere else it refuses and exits 1. It is root in its new user namespace, which owns its network
// and mount namespaces.
func ChildMain() {
	os.Exit(childMain())
}

func childMain() int {
	// Checked here as well as by the caller of IsChild: ChildMain is
	// exported, and acting on ChildEnv anywhere but in the namespace Start
	// made would create a TUN wherever the caller is.
	if err := checkChild(); err != nil {
		fmt.Fprintln(os.Stderr, "fips-go: ignoring", ChildEnv+":", err)
		return 1
	}
	unix.CloseOnExec(ctlFD)
	ctl, err := controlConn(ctlFD)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fips-go(userns):", err)
		return 1
	}
	var sp spec
	err = json.Unmarshal([]byte(os.Getenv(ChildEnv)), &sp)
	os.Unsetenv(ChildEnv)
	if err != nil {
		ctl.WriteMsgUnix(mustJSON(reply{Err: "bad spec: " + err.Error()}), nil, nil)
		return 1
	}
	tfd, err := setup(sp)
	if err != nil {
		ctl.WriteMsgUnix(mustJSON(reply{Err: err.Error()}), nil, nil)
		return 1
	}
	_, _, err = ctl.WriteMsgUnix(mustJSON(reply{}), unix.UnixRights(tfd), nil)
	unix.Close(tfd) // the command must not hold the TUN
	if err != nil {
		return 1
	}
	// Wait until the parent serves the TUN; EOF means it gave up.
	b := make([]byte, 1)
	if n, _, _, _, err := ctl.ReadMsgUnix(b, nil); err != nil || n != 1 || b[0] != 'g' {
		return 1
	}
	return runCommand(sp, os.Args[1:])
}

func controlConn(fd int) (*net.UnixConn, error) {
	f := os.NewFile(uintptr(fd), "userns-control")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, errors.New("control socket is not a unix socket")
	}
	return uc, nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// setup creates and configures the TUN and the resolv.conf, and returns
// the TUN's descriptor.
func setup(sp spec) (int, error) {
	tfd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, tunOpenError(err)
	}
	ifr, err := unix.NewIfreq(sp.Name)
	if err != nil {
		unix.Close(tfd)
		return -1, err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
	if err := unix.IoctlIfreq(tfd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(tfd)
		return -1, fmt.Errorf("create TUN %s in the namespace: %w", sp.Name, err)
	}
	iface, err := net.InterfaceByName(sp.Name)
	if err == nil {
		err = configure(sp.Name, iface.Index, sp.MTU, sp.Addresses, sp.Routes)
	}
	if err == nil {
		// Let the command ping without CAP_NET_RAW (ICMP datagram
		// sockets), as most distributions allow on the host: gid 0 here is
		// the caller's gid, the only one mapped. A kernel without IPv4
		// ping sockets only costs the command its ping.
		_ = os.WriteFile("/proc/sys/net/ipv4/ping_group_range", []byte("0 0"), 0)
	}
	if err == nil && sp.Resolv != "" {
		err = mountResolv(sp.Resolv)
	}
	if err != nil {
		unix.Close(tfd)
		return -1, err
	}
	return tfd, nil
}

func tunOpenError(err error) error {
	if !errors.Is(err, unix.EACCES) && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("open /dev/net/tun: %w", err)
	}
	mode := "unknown"
	if fi, serr := os.Stat("/dev/net/tun"); serr == nil {
		mode = fmt.Sprintf("%04o", fi.Mode().Perm())
	}
	return fmt.Errorf("open /dev/net/tun: %w: in a user namespace the device's file mode decides, and here it is %s; "+
		"distributions normally ship it 0666 (as root: chmod 0666 /dev/net/tun)", err, mode)
}

// mountResolv bind-mounts path over /etc/resolv.conf in this mount
// namespace only.
func mountResolv(path string) error {
	// Mounts copied into a namespace of a less privileged user namespace
	// are slaves already; private makes sure nothing of ours leaks out.
	_ = unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
	if err := unix.Mount(path, "/etc/resolv.conf", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mount the tunnel's DNS over /etc/resolv.conf: %w", err)
	}
	return nil
}

// runCommand runs the command in a user namespace of its own that maps the
// caller's uid and gid, so it runs as the caller, without capabilities;
// signals are passed on and its exit status becomes ours.
func runCommand(sp spec, args []string) int {
	cmd := exec.Command(sp.Path)
	cmd.Args = args
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:                 unix.CLONE_NEWUSER,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: sp.UID, HostID: 0, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: sp.GID, HostID: 0, Size: 1}},
		GidMappingsEnableSetgroups: false,
		Pdeathsig:                  unix.SIGKILL,
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "fips-go: %s: %v\n", args[0], err)
		return 127
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	return exitCode(cmd.ProcessState, err)
}

// exitCode is a shell's $? for a finished process: its status, or 128
// plus the signal that ended it.
func exitCode(ps *os.ProcessState, err error) int {
	if ps == nil {
		if err != nil {
			return 127
		}
		return 0
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
