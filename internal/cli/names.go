package cli

import (
	"context"
	"fmt"
	"io"
	"maps"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/dnsfollow"
	"github.com/fips-go/fips-go/ipc"
)

// namedDevice is a device as the UAPI server sees it, plus the endpoint
// names the daemon follows (set=fipsnames / get=fipsnames).
type namedDevice struct {
	*device.Device
	names *dnsfollow.Table
}

var _ ipc.NamesHandler = namedDevice{}

// Apply applies cfg, then forgets the names it overrides (an explicit
// endpoint, a removed peer, replaced peers).
func (n namedDevice) Apply(cfg *device.Config) error {
	if err := n.Device.Apply(cfg); err != nil {
		return err
	}
	n.names.Applied(cfg)
	return nil
}

func (n namedDevice) SetEndpointNames(names map[noise.PublicKey]string, replace bool) error {
	return n.names.Set(names, replace)
}

func (n namedDevice) EndpointNames() map[noise.PublicKey]string {
	return maps.Clone(n.names.Snapshot())
}

// followNames runs the follower for the names in t until stop is called.
func followNames(d *device.Device, t *dnsfollow.Table, logf func(string, ...any)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		dnsfollow.Run(ctx, d, t.Snapshot, dnsfollow.Options{Logf: logf, Changed: t.Changed()})
	}()
	return func() { cancel(); <-done }
}

// sendNames hands a config file's endpoint names to the daemon after its
// set. A daemon that keeps no names (wireguard-go) refuses; the addresses
// the names resolved to are set all the same, so that is only a warning,
// and only when there were names to follow.
func sendNames(cl *ipc.Client, names map[noise.PublicKey]string, replace bool, warn io.Writer) {
	if err := cl.SetEndpointNames(names, replace); err != nil && len(names) > 0 {
		fmt.Fprintf(warn, "warning: the daemon does not follow endpoint host names (%v); their addresses as resolved now are set\n", err)
	}
}
