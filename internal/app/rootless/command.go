package rootless

import (
	"cmp"
	"net/netip"
	"os"
	"syscall"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/internal/app/userns"
	"github.com/fips-go/fips-go/internal/engine"
	"github.com/fips-go/fips-go/ipc"
	"github.com/fips-go/fips-go/tun"
	"github.com/fips-go/fips-go/tun/netstack"
)

// CommandOptions configure a command run in a new user and network
// namespace whose network is a kernel TUN served from the caller's
// namespace, where the UDP socket stays. The kernel's TCP/IP stack and the
// TUN's offloads serve the command: the fastest path without root, and any
// program works unchanged. The program must call the namespace child's
// entry point first thing in main (fips-go's does).
type CommandOptions struct {
	// Config is applied at start: its peers' allowed IPs are routed
	// through the TUN, its Addresses are the TUN's, its MTU the TUN's
	// (default 1420), and its DNS and DNSSearch make the namespace's
	// resolv.conf (both empty: the host's).
	Config *ipc.QuickConfig
	// Name is the TUN's inside the namespace (default fipsgo0).
	Name string
	// Args is the command and its arguments, Args[0] looked up in PATH.
	Args []string
	// Engine starts the device (see engine.Start).
	Engine engine.Options
}

// NamespaceError is StartCommand's error when the namespace or its TUN
// could not be made, as opposed to the device failing.
type NamespaceError struct{ Err error }

func (e *NamespaceError) Error() string { return e.Err.Error() }
func (e *NamespaceError) Unwrap() error { return e.Err }

// Command is a namespace with its device running and the command not yet
// started.
type Command struct {
	*engine.Engine
	sess *userns.Session
	logf func(string, ...any)
}

// StartCommand makes the namespace and serves its TUN; Run then starts the
// command. Call Close when done with a Command.
func StartCommand(o CommandOptions) (*Command, error) {
	q := o.Config
	mtu := cmp.Or(q.MTU, netstack.DefaultMTU)
	sess, err := userns.Start(userns.Options{
		Name: o.Name, MTU: mtu, Addresses: q.Addresses, Routes: AllowedRoutes(q.Config),
		DNS: q.DNS, DNSSearch: q.DNSSearch, Args: o.Args,
	})
	if err != nil {
		return nil, &NamespaceError{err}
	}
	t, err := tun.CreateDetached(sess.TUN, mtu)
	if err != nil {
		sess.Abort()
		return nil, err
	}
	eng, err := engine.Start(t, q, o.Engine)
	if err != nil {
		sess.Abort()
		return nil, err
	}
	logf := o.Engine.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Command{Engine: eng, sess: sess, logf: logf}, nil
}

// Run starts the command and waits for it, passing on each signal from
// sigs; it returns the command's exit status. When the device stops first,
// the command gets SIGTERM. Close the Command after.
func (c *Command) Run(sigs <-chan os.Signal) (int, error) {
	if err := c.sess.Go(); err != nil {
		c.sess.Abort()
		return 0, err
	}
	done := make(chan int, 1)
	go func() { done <- c.sess.Wait() }()
	devDone := c.Device.Done()
	for {
		select {
		case s := <-sigs:
			c.sess.Signal(s)
		case <-devDone:
			c.logf("tunnel stopped: %v; ending the command", c.Device.Err())
			c.sess.Signal(syscall.SIGTERM)
			devDone = nil
		case code := <-done:
			return code, nil
		}
	}
}

// ChildPid is the namespace child's process id: the process Run passes
// signals on to.
func (c *Command) ChildPid() int { return c.sess.Pid() }

// Close ends the namespace (killing the command if it still runs) and the
// device.
func (c *Command) Close() {
	c.sess.Abort()
	c.Engine.Close()
}

// AllowedRoutes are the peers' allowed IPs in cfg, each once.
func AllowedRoutes(cfg *device.Config) []netip.Prefix {
	seen := map[netip.Prefix]bool{}
	var out []netip.Prefix
	for _, p := range cfg.Peers {
		for _, c := range p.AllowedIPs {
			if c.Remove {
				continue
			}
			a := c.Prefix.Masked()
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	return out
}
