package cli

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync/atomic"

	"github.com/fips-go/fips-go/internal/app/rootless"
	"github.com/fips-go/fips-go/ipc"
)

// `fips-go userspace -c FILE -- CMD`: CMD runs in a new user and network
// namespace whose network is a kernel TUN, served from here, where the UDP
// socket stays.

// exitStatus is the command's exit status, passed on as fips-go's own.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("command exited with status %d", int(e)) }

// runUserspaceCmd runs args through the tunnel and returns exitStatus
// when the command fails.
func runUserspaceCmd(o userspaceOptions, args []string) error {
	// Signals that arrive while the namespace is being set up are kept
	// for the command instead of killing us half-way.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)
	if len(o.dns) == 0 {
		if b, err := os.ReadFile("/etc/resolv.conf"); err == nil {
			if lo := loopbackResolvers(string(b)); len(lo) > 0 {
				o.notef("no DNS in the config, and /etc/resolv.conf names %s, a loopback the command's namespace does not share: names will not resolve there (set DNS in [Interface])", strings.Join(lo, ", "))
			}
		}
	}
	cmd, err := rootless.StartCommand(rootless.CommandOptions{
		Config: o.quick(), Name: o.name, Args: args, Engine: o.engineOptions(),
	})
	var nsErr *rootless.NamespaceError
	if errors.As(err, &nsErr) && !errors.Is(err, exec.ErrNotFound) {
		return fmt.Errorf("%w\nThe netstack modes need no namespaces and no /dev/net/tun: --socks5 1080, --http 8080 or -L LOCAL=REMOTE", err)
	}
	if err != nil {
		return err
	}
	defer cmd.Close()
	stopMetrics, err := startMetrics(o.metrics, o.name, cmd.Device, o.logf)
	if err != nil {
		return err
	}
	defer stopMetrics()
	var sb atomic.Pointer[string]
	h := rootlessHandler{engineHandler(cmd.Engine), &sb}
	if o.socketDir != "" {
		l, err := listenUAPI(o, h)
		if err != nil {
			return err
		}
		defer l.Close()
	}
	// The namespace child exists (and starts the command, unrestricted,
	// on Run): the sandbox applies to this process only.
	sandboxRootless(o, cmd.ChildPid(), &sb)
	code, err := cmd.Run(sigs)
	if err != nil {
		return fmt.Errorf("userns: start the command: %w", err)
	}
	if code != 0 {
		return exitStatus(code)
	}
	return nil
}

// listenUAPI serves the UAPI socket for dev. When the name was not
// chosen with --name and another session holds it, the next free one of
// fipsgo1 to fipsgo15 is taken, so parallel sessions just work.
func listenUAPI(o userspaceOptions, h ipc.Handler) (*ipc.Listener, error) {
	if err := privateSocketDir(o.socketDir, os.Getuid()); err != nil {
		return nil, err
	}
	name := o.name
	l, err := ipc.Listen(o.socketDir, name)
	for i := 1; errors.Is(err, ipc.ErrInUse) && !o.nameSet && i < 16; i++ {
		name = fmt.Sprintf("fipsgo%d", i)
		l, err = ipc.Listen(o.socketDir, name)
	}
	if err != nil {
		return nil, err
	}
	if name != o.name {
		o.logf("UAPI socket %s is in use; serving %s/%s.sock", o.name, o.socketDir, name)
	}
	go l.Serve(h, ipc.ServeOptions{Logf: o.logf})
	return l, nil
}

// loopbackResolvers lists the name servers of a resolv.conf that are
// loopback addresses (a local resolver such as systemd-resolved's
// 127.0.0.53).
func loopbackResolvers(conf string) []string {
	var out []string
	for line := range strings.Lines(conf) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "nameserver" {
			if a, err := netip.ParseAddr(f[1]); err == nil && a.Unmap().IsLoopback() {
				out = append(out, f[1])
			}
		}
	}
	return out
}
