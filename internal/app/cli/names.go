package cli

import (
	"fmt"
	"io"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/engine"
	"github.com/fips-go/fips-go/ipc"
)

// namedDevice is a device as the UAPI server sees it, plus the endpoint
// names the daemon follows (set=fipsnames / get=fipsnames).
type namedDevice struct {
	*device.Device
	names *engine.Follower
	rel   *releaser
	// extra, when set, adds counters of the mode's own (the rootless
	// exit's) to Status.
	extra func() []device.Counter
}

var _ ipc.NamesHandler = namedDevice{}

// Apply applies cfg, then forgets the names it overrides (an explicit
// endpoint, a removed peer, replaced peers).
func (n namedDevice) Apply(cfg *device.Config) error {
	if err := n.Device.Apply(cfg); err != nil {
		return err
	}
	n.names.Applied(cfg)
	if len(cfg.Peers) >= bigApply {
		n.rel.soon()
	}
	return nil
}

// Status implements ipc.Handler: a gateway's status is garbage of many
// times its peers' size once written out, so a large one returns memory
// too (see releaser).
func (n namedDevice) Status() device.Status {
	st := n.Device.Status()
	if n.extra != nil {
		st.Counters = append(st.Counters, n.extra()...)
	}
	if len(st.Peers) >= bigApply {
		n.rel.soon()
	}
	return st
}

// bigApply is the size, in peers, of a configuration request or a status
// after which the daemon returns freed memory to the system.
const bigApply = 1000

// releaser returns freed memory to the system shortly after a large UAPI
// request, once per burst of them. Parsing, applying and writing out a
// gateway's configuration leaves garbage of several times its live size,
// and the runtime keeps those pages for reuse: with 100,000 peers (105 MiB
// of live heap) RSS stood at 253 MiB after setconf and grew by about 106
// MiB with each of the next two dumps, and stayed there. A forced
// collection costs tens of milliseconds at that size, nothing against the
// request. It waits releaseAfter because a status is garbage only once the
// server has written it out, after Status returns.
type releaser struct {
	pending atomic.Bool
}

// releaseAfter is how long after the first large request of a burst the
// releaser runs.
const releaseAfter = time.Second

func (r *releaser) soon() {
	if !r.pending.CompareAndSwap(false, true) {
		return
	}
	time.AfterFunc(releaseAfter, func() {
		r.pending.Store(false)
		debug.FreeOSMemory()
	})
}

func (n namedDevice) SetEndpointNames(names map[noise.PublicKey]string, replace bool) error {
	return n.names.Set(names, replace)
}

func (n namedDevice) EndpointNames() map[noise.PublicKey]string {
	return n.names.Names()
}

// followNames makes d's endpoints given as host names (none at first:
// what set=fipsnames brings) follow the name when handshakes fail, until
// stop is called, and returns the handler the daemon serves on its UAPI
// socket, so that `fips-go setconf` can change them.
func followNames(d *device.Device, logf func(string, ...any)) (h namedDevice, stop func(), err error) {
	f, err := engine.Follow(d, nil, engine.FollowOptions{Logf: logf})
	if err != nil {
		return namedDevice{}, nil, err
	}
	return engineHandler(&engine.Engine{Device: d, Names: f}), f.Stop, nil
}

// engineHandler is the UAPI handler of e's device and followed names.
func engineHandler(e *engine.Engine) namedDevice {
	return namedDevice{Device: e.Device, names: e.Names, rel: new(releaser)}
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
