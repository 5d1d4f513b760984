// Package dnsfollow keeps peers whose endpoint was given as a host name
// reachable when the name moves to a new address: when handshakes to such
// a peer go unanswered, the name is resolved again and a changed address
// applied. Policy is the pure decision (no clock, no I/O); Run is the loop
// around it.
package dnsfollow

import (
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/fips-go/fips-go/device/noise"
)

// Defaults for Options.
const (
	// DefaultMinInterval: a peer's name is resolved at most once per this.
	DefaultMinInterval = 10 * time.Second
	// DefaultFailAfter: an initiation unanswered this long (the protocol's
	// REKEY_TIMEOUT, after which it is retransmitted) means the handshake
	// failed.
	DefaultFailAfter = 5 * time.Second
)

// Observation is what the device says about one peer.
type Observation struct {
	Key            noise.PublicKey
	Endpoint       netip.AddrPort
	LastHandshake  time.Time // zero: none yet
	LastInitiation time.Time // zero: never sent one
}

// Job asks for one name to be resolved.
type Job struct {
	Key  noise.PublicKey
	Host string
}

// Policy decides which names to resolve and what to apply. Not safe for
// concurrent use: one loop owns it.
type Policy struct {
	minInterval, failAfter time.Duration
	peers                  map[noise.PublicKey]*entry
}

type entry struct {
	name     string // as given, "host:port"
	host     string
	port     uint16
	last     time.Time // when the last resolve started (zero: never)
	inFlight bool
	// failingSince is the first unanswered initiation seen since the last
	// completed handshake (zero: none).
	failingSince time.Time
}

// NewPolicy follows names, a peer's "host:port" each; entries that do not
// parse are left out and returned, so the caller can say so. Zero
// durations take the defaults.
func NewPolicy(names map[noise.PublicKey]string, minInterval, failAfter time.Duration) (*Policy, []string) {
	if minInterval <= 0 {
		minInterval = DefaultMinInterval
	}
	if failAfter <= 0 {
		failAfter = DefaultFailAfter
	}
	p := &Policy{minInterval: minInterval, failAfter: failAfter, peers: map[noise.PublicKey]*entry{}}
	return p, p.Sync(names)
}

// Sync makes the followed names those of names: new ones are added,
// missing ones dropped, and a peer whose name changed starts afresh; an
// unchanged name keeps its rate limit and any lookup in flight. Entries
// that do not parse are left out and returned.
func (p *Policy) Sync(names map[noise.PublicKey]string) []string {
	for k, e := range p.peers {
		if n, ok := names[k]; !ok || n != e.name {
			delete(p.peers, k)
		}
	}
	var bad []string
	for k, name := range names {
		if _, ok := p.peers[k]; ok {
			continue
		}
		host, port, err := net.SplitHostPort(name)
		n, perr := strconv.ParseUint(port, 10, 16)
		if err != nil || perr != nil || host == "" {
			bad = append(bad, name)
			continue
		}
		p.peers[k] = &entry{name: name, host: host, port: uint16(n)}
	}
	return bad
}

// Len is the number of names followed.
func (p *Policy) Len() int { return len(p.peers) }

// unanswered reports whether o's latest initiation came after its last
// completed handshake.
func unanswered(o Observation) bool {
	return !o.LastInitiation.IsZero() && o.LastInitiation.After(o.LastHandshake)
}

// Due returns at most max names to resolve now and marks them in flight:
// followed peers whose initiations have gone unanswered for failAfter
// (since the first of them), with no resolve in flight (so
// triggers that come while one runs are coalesced into it) and none
// started within minInterval.
func (p *Policy) Due(now time.Time, obs []Observation, max int) []Job {
	var jobs []Job
	for _, o := range obs {
		if len(jobs) >= max {
			break
		}
		e := p.peers[o.Key]
		if e == nil {
			continue
		}
		// Retransmissions renew LastInitiation every REKEY_TIMEOUT, so
		// failure is measured from the first unanswered one seen.
		if !unanswered(o) {
			e.failingSince = time.Time{}
			continue
		}
		if e.failingSince.IsZero() {
			e.failingSince = o.LastInitiation
		}
		if e.inFlight || now.Sub(e.failingSince) < p.failAfter {
			continue
		}
		if !e.last.IsZero() && now.Sub(e.last) < p.minInterval {
			continue
		}
		e.inFlight, e.last = true, now
		jobs = append(jobs, Job{Key: o.Key, Host: e.host})
	}
	return jobs
}

// Done records the outcome of job and returns the endpoint to apply, or
// false to keep current: on an error, when no address came back, when
// current is still among them (a name with several addresses does not
// flap between them), or when the peer's name changed meanwhile.
func (p *Policy) Done(job Job, addrs []netip.Addr, err error, current netip.AddrPort) (netip.AddrPort, bool) {
	e := p.peers[job.Key]
	if e == nil || e.host != job.Host {
		return netip.AddrPort{}, false
	}
	e.inFlight = false
	if err != nil || len(addrs) == 0 {
		return netip.AddrPort{}, false
	}
	for _, a := range addrs {
		if netip.AddrPortFrom(a.Unmap(), e.port) == current {
			return netip.AddrPort{}, false
		}
	}
	return netip.AddrPortFrom(addrs[0].Unmap(), e.port), true
}
