package rootless

import (
	"cmp"
	"errors"
	"net/netip"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/tun/netstack"
)

// NetstackOptions configure a tunnel whose far side is reached through a
// userspace TCP/IP stack: no namespaces, no TUN, no privileges.
type NetstackOptions struct {
	// Config is applied at start; it names at least the private key.
	// Its ListenPort, if set, is the UDP port opened.
	Config *device.Config
	// Addresses are the stack's own addresses in the tunnel.
	Addresses []netip.Addr
	// MTU of the stack's interface (default netstack.DefaultMTU).
	MTU int
	// Name is the interface's name, as logs and metrics show it.
	Name string
	// Promiscuous makes the stack accept packets to any address, for a
	// forwarder (the exit); see netstack.Options.Promiscuous.
	Promiscuous bool
	// ACKHold thins the peers' pure ACKs; see netstack.Options.ACKHold.
	ACKHold time.Duration
	// TimerSlack delays the stack's loss probes; see netstack.Options.TimerSlack.
	TimerSlack time.Duration
	// Device and Bind are passed to device.New and conn.NewDefault.
	Device device.Options
	Bind   conn.Options
}

// Netstack is a running device on a userspace TCP/IP stack.
type Netstack struct {
	Net    *netstack.Net
	Device *device.Device
}

// OpenNetstack starts the stack and its device and applies o.Config.
func OpenNetstack(o NetstackOptions) (*Netstack, error) {
	if o.Config == nil {
		return nil, errors.New("rootless: no device configuration")
	}
	ns, err := netstack.New(netstack.Options{Addresses: o.Addresses, MTU: cmp.Or(o.MTU, netstack.DefaultMTU), Name: o.Name, Promiscuous: o.Promiscuous, ACKHold: o.ACKHold, TimerSlack: o.TimerSlack})
	if err != nil {
		return nil, err
	}
	dopts := o.Device
	if o.Config.ListenPort != nil && dopts.ListenPort == 0 {
		dopts.ListenPort = *o.Config.ListenPort
	}
	dev, err := device.New(ns, conn.NewDefault(o.Bind), dopts)
	if err != nil {
		ns.Close()
		return nil, err
	}
	if err := dev.Apply(o.Config); err != nil {
		dev.Close()
		return nil, err
	}
	return &Netstack{Net: ns, Device: dev}, nil
}

// Close stops the device, which closes the stack.
func (n *Netstack) Close() error {
	n.Device.Close()
	return nil
}
