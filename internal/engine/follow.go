package engine

import (
	"context"
	"maps"
	"net/netip"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/engine/dnsfollow"
)

// FollowOptions tune Follow; the zero value works.
type FollowOptions struct {
	// Logf receives a line per lookup and per changed address; nil
	// discards.
	Logf func(format string, args ...any)
	// Resolve looks names up (nil: the system resolver).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
}

// Follower keeps a device's endpoints given as host names on their name's
// current address, looking again when handshakes to them fail. The names
// can change while it runs (set=fipsnames over UAPI).
type Follower struct {
	table  *dnsfollow.Table
	cancel context.CancelFunc
	done   chan struct{}
}

// Follow starts following names on d until Stop. Every mode with a device
// follows through one Follower, so the UAPI socket can change its names.
func Follow(d *device.Device, names map[noise.PublicKey]string, o FollowOptions) (*Follower, error) {
	t := dnsfollow.NewTable()
	if err := t.Set(names, true); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Follower{table: t, cancel: cancel, done: make(chan struct{})}
	var resolve dnsfollow.Resolver
	if o.Resolve != nil {
		resolve = dnsfollow.Resolver(o.Resolve)
	}
	go func() {
		defer close(f.done)
		dnsfollow.Run(ctx, d, t.Snapshot, dnsfollow.Options{Logf: o.Logf, Resolve: resolve, Changed: t.Changed()})
	}()
	return f, nil
}

// Stop ends the following and waits for it. Stopping twice is harmless.
func (f *Follower) Stop() {
	f.cancel()
	<-f.done
}

// Set changes the names followed: replace drops the others, else names
// are added to them.
func (f *Follower) Set(names map[noise.PublicKey]string, replace bool) error {
	return f.table.Set(names, replace)
}

// Names are the names followed now.
func (f *Follower) Names() map[noise.PublicKey]string { return maps.Clone(f.table.Snapshot()) }

// Applied forgets the names that cfg overrides (an explicit endpoint, a
// removed peer, replaced peers); call it after cfg was applied.
func (f *Follower) Applied(cfg *device.Config) { f.table.Applied(cfg) }
