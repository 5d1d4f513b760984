package dnsfollow

import (
	"context"
	"math"
	"net"
	"net/netip"
	"time"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
)

// Device is what Run needs of a device; *device.Device is one.
type Device interface {
	Stats(maxPeers int) device.Stats
	Apply(cfg *device.Config) error
}

// Resolver looks a host up afresh (Run keeps no cache of its own).
type Resolver func(ctx context.Context, host string) ([]netip.Addr, error)

// Options tune Run. The zero value works.
type Options struct {
	// Resolve looks names up (nil: the system resolver, 10 s per lookup).
	Resolve Resolver
	// Tick is how often the device is looked at (default 1 s).
	Tick time.Duration
	// MinInterval and FailAfter: see NewPolicy.
	MinInterval, FailAfter time.Duration
	// MaxLookups bounds lookups in flight at once (default 8).
	MaxLookups int
	// Logf receives a line per changed address and per failed lookup; nil
	// discards.
	Logf func(format string, args ...any)
}

func (o Options) withDefaults() Options {
	if o.Resolve == nil {
		o.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if o.Tick <= 0 {
		o.Tick = time.Second
	}
	if o.MaxLookups <= 0 {
		o.MaxLookups = 8
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

type result struct {
	key   noise.PublicKey
	host  string
	addrs []netip.Addr
	err   error
}

// Run follows names (peer key to "host:port") on dev until ctx ends.
// Lookups run on their own goroutines, at most MaxLookups at once; the
// policy and the device are touched only here. A changed address is
// applied as one update-only change of that peer's endpoint, so a peer
// removed meanwhile is not brought back.
func Run(ctx context.Context, dev Device, names map[noise.PublicKey]string, opts Options) {
	opts = opts.withDefaults()
	pol, bad := NewPolicy(names, opts.MinInterval, opts.FailAfter)
	for _, b := range bad {
		opts.Logf("dnsfollow: not following %q: want host:port", b)
	}
	if pol.Len() == 0 {
		return
	}
	results := make(chan result, pol.Len())
	sem := make(chan struct{}, opts.MaxLookups)
	tick := time.NewTicker(opts.Tick)
	defer tick.Stop()
	current := map[noise.PublicKey]netip.AddrPort{}
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-results:
			ap, change := pol.Done(r.key, r.addrs, r.err, current[r.key])
			if r.err != nil {
				opts.Logf("dnsfollow: resolving %s: %v", r.host, r.err)
			}
			if change {
				err := dev.Apply(&device.Config{Peers: []device.PeerConfig{{PublicKey: r.key, UpdateOnly: true, Endpoint: &ap}}})
				opts.Logf("dnsfollow: %s moved from %v to %v (applied: %v)", r.host, current[r.key], ap, err)
			}
		case now := <-tick.C:
			st := dev.Stats(math.MaxInt)
			obs := make([]Observation, len(st.PeerStats))
			for i, ps := range st.PeerStats {
				obs[i] = Observation{Key: ps.PublicKey, Endpoint: ps.Endpoint, LastHandshake: ps.LastHandshake, LastInitiation: ps.LastInitiation}
				current[ps.PublicKey] = ps.Endpoint
			}
			for _, job := range pol.Due(now, obs) {
				go func() {
					sem <- struct{}{}
					defer func() { <-sem }()
					addrs, err := opts.Resolve(ctx, job.Host)
					results <- result{key: job.Key, host: job.Host, addrs: addrs, err: err}
				}()
			}
		}
	}
}
