// Package engine starts a WireGuard device with a wg-quick configuration
// on a TUN or on a userspace TCP/IP stack: the one set-up that the Go
// library (package tunnel), the rootless modes and `fips-go bench` share,
// so that what one of them honours (a listen port, a follow of endpoint
// names, a warning for ignored lines) none of them loses.
package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/internal/engine/pcap"
	"github.com/fips-go/fips-go/ipc"
	"github.com/fips-go/fips-go/tun"
	"github.com/fips-go/fips-go/tun/netstack"
)

// Options configure an Engine; the zero value works.
type Options struct {
	// Logf receives operational messages, never one per packet; nil
	// discards them. It is the device's Logf unless Device.Logf is set.
	Logf func(format string, args ...any)
	// Device and Bind are passed to device.New and conn.NewDefault. A
	// non-zero Device.ListenPort wins over the configuration's.
	Device device.Options
	Bind   conn.Options
	// Capture, if set, receives the tunnel's inner packets, both ways, as
	// a pcap file (see package pcap); the engine does not close it.
	Capture io.Writer
	// Source names the configuration in messages (a file's path).
	Source string
	// NoFollow turns off following endpoints given as host names.
	NoFollow bool
	// Resolve looks endpoint host names up when following them (nil: the
	// system resolver).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
}

func (o *Options) logf() func(string, ...any) {
	if o.Logf != nil {
		return o.Logf
	}
	return func(string, ...any) {}
}

// Engine is a running device, its stack when it has one, and the follower
// of its endpoint names.
type Engine struct {
	// Device is the running device.
	Device *device.Device
	// Net is the userspace stack for an Engine from StartNetstack, else nil.
	Net *netstack.Net
	// Names are the endpoint names followed (empty with NoFollow).
	Names *Follower
	logs  *logSink // gVisor's log lines to Logf, for a Net
}

// Start runs a device on t with q's configuration applied and its
// endpoint names followed. The UDP port is o.Device.ListenPort if set,
// else q's ListenPort, else one the system picks. Lines of q that mean
// nothing here (q.Ignored) are logged. On error t is closed.
func Start(t tun.Device, q *ipc.QuickConfig, o Options) (*Engine, error) {
	if q == nil || q.Config == nil {
		t.Close()
		return nil, errors.New("engine: no configuration")
	}
	logf := o.logf()
	if len(q.Ignored) > 0 {
		logf("%s: ignoring %s (wg-quick hooks and routing tables need a kernel interface)", cmp.Or(o.Source, "config"), strings.Join(q.Ignored, ", "))
	}
	dopts := o.Device
	if dopts.Logf == nil {
		dopts.Logf = logf
	}
	if o.Capture != nil {
		w, err := pcap.NewWriter(o.Capture, nil)
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("engine: capture: %w", err)
		}
		t = pcap.Wrap(t, w)
	}
	cfg := *q.Config
	dopts.ListenPort = ListenPort(dopts.ListenPort, cfg.ListenPort)
	// The device opened its socket on that port; applying the file's
	// port again would rebind it (to 0: some other port).
	cfg.ListenPort = nil
	dev, err := device.New(t, conn.NewDefault(o.Bind), dopts)
	if err != nil {
		t.Close()
		return nil, err
	}
	if err := dev.Apply(&cfg); err != nil {
		dev.Close()
		return nil, err
	}
	e := &Engine{Device: dev}
	names := q.Names
	if o.NoFollow {
		names = nil
	}
	e.Names, err = Follow(dev, names, FollowOptions{Logf: logf, Resolve: o.Resolve})
	if err != nil {
		dev.Close()
		return nil, err
	}
	return e, nil
}

// ListenPort is the UDP port to open: asked when non-zero (an option or a
// flag), else the configuration's, else 0 (the system picks).
func ListenPort(asked uint16, configured *uint16) uint16 {
	if asked != 0 || configured == nil {
		return asked
	}
	return *configured
}

// Apply changes the device's configuration and forgets the followed names
// that cfg overrides (an explicit endpoint, a removed peer).
func (e *Engine) Apply(cfg *device.Config) error {
	if err := e.Device.Apply(cfg); err != nil {
		return err
	}
	e.Names.Applied(cfg)
	return nil
}

// Close stops following names and closes the device, which closes its
// TUN or stack. Closing twice is harmless.
func (e *Engine) Close() {
	e.Names.Stop()
	e.Device.Close()
	if e.logs != nil {
		e.logs.remove()
	}
}

// StartNetstack runs a device on a new userspace stack whose addresses and
// MTU are q's (nopts.MTU when q has none); nopts.Logf defaults to o.Logf,
// and gVisor's own log lines go there too.
func StartNetstack(q *ipc.QuickConfig, nopts netstack.Options, o Options) (*Engine, error) {
	if q == nil || q.Config == nil {
		return nil, errors.New("engine: no configuration")
	}
	nopts.Addresses = nil
	for _, p := range q.Addresses {
		nopts.Addresses = append(nopts.Addresses, p.Addr().Unmap())
	}
	nopts.MTU = cmp.Or(q.MTU, nopts.MTU)
	if nopts.Logf == nil {
		nopts.Logf = o.logf()
	}
	ns, err := netstack.New(nopts)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e, err := Start(ns, q, o)
	if err != nil {
		return nil, err
	}
	e.Net = ns
	e.logs = gvisorLogs.add(nopts.Logf)
	return e, nil
}
