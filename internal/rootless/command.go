package rootless

import (
	"net/netip"
	"os"
	"syscall"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/internal/userns"
	"github.com/fips-go/fips-go/tun"
)

// CommandOptions configure a command run in a new user and network
// namespace whose network is a kernel TUN served from the caller's
// namespace, where the UDP socket stays. The kernel's TCP/IP stack and the
// TUN's offloads serve the command: the fastest path without root, and any
// program works unchanged. The program must call the namespace child's
// entry point first thing in main (fips-go's does).
type CommandOptions struct {
	// Config is applied at start; its peers' allowed IPs are routed
	// through the TUN, and its ListenPort, if set, is the UDP port opened.
	Config *device.Config
	// Name and MTU are the TUN's inside the namespace (defaults fipsgo0
	// and 1420).
	Name string
	MTU  int
	// Addresses are the TUN's addresses with their subnets.
	Addresses []netip.Prefix
	// DNS and DNSSearch make the namespace's resolv.conf (both empty:
	// the host's).
	DNS       []netip.Addr
	DNSSearch []string
	// Args is the command and its arguments, Args[0] looked up in PATH.
	Args []string
	// Device and Bind are passed to device.New and conn.NewDefault.
	Device device.Options
	Bind   conn.Options
}

// NamespaceError is StartCommand's error when the namespace or its TUN
// could not be made, as opposed to the device failing.
type NamespaceError struct{ Err error }

func (e *NamespaceError) Error() string { return e.Err.Error() }
func (e *NamespaceError) Unwrap() error { return e.Err }

// Command is a namespace with its device running and the command not yet
// started.
type Command struct {
	Device *device.Device
	sess   *userns.Session
	logf   func(string, ...any)
}

// StartCommand makes the namespace and serves its TUN; Run then starts the
// command. Call Close when done with a Command.
func StartCommand(o CommandOptions) (*Command, error) {
	sess, err := userns.Start(userns.Options{
		Name: o.Name, MTU: o.MTU, Addresses: o.Addresses, Routes: AllowedRoutes(o.Config),
		DNS: o.DNS, DNSSearch: o.DNSSearch, Args: o.Args,
	})
	if err != nil {
		return nil, &NamespaceError{err}
	}
	dev, err := serveTUN(sess.TUN, o)
	if err != nil {
		sess.Abort()
		return nil, err
	}
	logf := o.Device.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Command{Device: dev, sess: sess, logf: logf}, nil
}

// serveTUN runs a device on the namespace's TUN with its bind here.
func serveTUN(fd int, o CommandOptions) (*device.Device, error) {
	t, err := tun.CreateDetached(fd, o.MTU)
	if err != nil {
		return nil, err
	}
	dopts := o.Device
	if o.Config.ListenPort != nil && dopts.ListenPort == 0 {
		dopts.ListenPort = *o.Config.ListenPort
	}
	dev, err := device.New(t, conn.NewDefault(o.Bind), dopts)
	if err != nil {
		t.Close()
		return nil, err
	}
	if err := dev.Apply(o.Config); err != nil {
		dev.Close()
		return nil, err
	}
	return dev, nil
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

// Close ends the namespace (killing the command if it still runs) and the
// device.
func (c *Command) Close() {
	c.sess.Abort()
	c.Device.Close()
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
