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
	// Logf receives a line per lookup (at most one per peer per
	// MinInterval) and per changed address; nil discards.
	Logf func(format string, args ...any)
	// Changed, if set, receives a value whenever the names may have
	// changed (Table.Changed). With it, Run stops ticking while there are
	// no names to follow, as on a daemon configured with addresses only,
	// and looks again when told; without it, it ticks all the time.
	Changed <-chan struct{}
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
	job   Job
	addrs []netip.Addr
	err   error
}

// Names returns the names to follow now, peer key to "host:port". Run
// calls it on every tick; the map must not be changed afterwards.
type Names func() map[noise.PublicKey]string

// Static is Names for a set that never changes.
func Static(names map[noise.PublicKey]string) Names {
	return func() map[noise.PublicKey]string { return names }
}

// Run follows names on dev until ctx ends. Lookups run on their own
// goroutines, one per followed peer at most and MaxLookups at once; the
// policy and the device are touched only here. A changed address is
// applied as one update-only change of that peer's endpoint, so a peer
// removed meanwhile is not brought back.
func Run(ctx context.Context, dev Device, names Names, opts Options) {
	opts = opts.withDefaults()
	pol, _ := NewPolicy(nil, opts.MinInterval, opts.FailAfter)
	reported := map[string]bool{}
	// One pending result per followed peer at most; sized on the fly.
	results := make(chan result, 64)
	pending := 0
	sem := make(chan struct{}, opts.MaxLookups)
	tick := time.NewTicker(opts.Tick)
	defer tick.Stop()
	ticks := tick.C // nil while there is nothing to follow
	defer func() {
		for ; pending > 0; pending-- {
			<-results
		}
	}()
	current := map[noise.PublicKey]netip.AddrPort{}
	look := func(now time.Time) {
		for _, b := range pol.Sync(names()) {
			if !reported[b] {
				reported[b] = true
				opts.Logf("dnsfollow: not following %q: want host:port", b)
			}
		}
		if pol.Len() == 0 {
			if opts.Changed != nil && pending == 0 {
				tick.Stop()
				ticks = nil
			}
			return
		}
		st := dev.Stats(math.MaxInt)
		obs := make([]Observation, len(st.PeerStats))
		clear(current)
		for i, ps := range st.PeerStats {
			obs[i] = Observation{Key: ps.PublicKey, Endpoint: ps.Endpoint, LastHandshake: ps.LastHandshake, LastInitiation: ps.LastInitiation}
			current[ps.PublicKey] = ps.Endpoint
		}
		// The rest are due again next tick.
		for _, job := range pol.Due(now, obs, cap(results)-pending) {
			pending++
			go func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				addrs, err := opts.Resolve(ctx, job.Host)
				results <- result{job: job, addrs: addrs, err: err}
			}()
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-results:
			pending--
			key := r.job.Key
			ap, change := pol.Done(r.job, r.addrs, r.err, current[key])
			if r.err != nil {
				opts.Logf("dnsfollow: handshakes to %s fail; resolving it again: %v", r.job.Host, r.err)
			} else if !change {
				opts.Logf("dnsfollow: handshakes to %s fail; it still resolves to %v", r.job.Host, r.addrs)
			}
			if change {
				err := dev.Apply(&device.Config{Peers: []device.PeerConfig{{PublicKey: key, UpdateOnly: true, Endpoint: &ap}}})
				opts.Logf("dnsfollow: %s moved from %v to %v (applied: %v)", r.job.Host, current[key], ap, err)
			}
		case <-opts.Changed:
			if ticks == nil {
				tick.Reset(opts.Tick)
				ticks = tick.C
			}
			look(time.Now())
		case now := <-ticks:
			look(now)
		}
	}
}
