package dnsfollow

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/fips-go/fips-go/device/noise"
)

var (
	k1 = noise.PublicKey{1}
	k2 = noise.PublicKey{2}
	t0 = time.Unix(1700000000, 0)
)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// failingObs is a peer whose initiation at `init` seconds is unanswered.
func failingObs(k noise.PublicKey, init float64) Observation {
	return Observation{Key: k, LastHandshake: at(-100), LastInitiation: at(init)}
}

func TestFailing(t *testing.T) {
	p, _ := NewPolicy(nil, 0, 0)
	for _, c := range []struct {
		o    Observation
		now  float64
		want bool
	}{
		{Observation{}, 100, false}, // never initiated
		{Observation{LastInitiation: at(1), LastHandshake: at(1.1)}, 100, false}, // answered
		{failingObs(k1, 10), 14.9, false},                                        // not yet REKEY_TIMEOUT
		{failingObs(k1, 10), 15, true},
		{Observation{LastInitiation: at(10)}, 15, true}, // no handshake ever
	} {
		if got := p.Failing(c.o, at(c.now)); got != c.want {
			t.Errorf("Failing(%+v at %v) = %v", c.o, c.now, got)
		}
	}
}

// The rate limit holds per peer, triggers during a lookup are coalesced
// into it, and healthy or unnamed peers are never looked up.
func TestDueRateLimitAndCoalescing(t *testing.T) {
	p, bad := NewPolicy(map[noise.PublicKey]string{k1: "a.example:51820", k2: "b.example:51821"}, 0, 0)
	if len(bad) != 0 || p.Len() != 2 {
		t.Fatalf("names: bad %v, len %d", bad, p.Len())
	}
	healthy := Observation{Key: k2, LastInitiation: at(1), LastHandshake: at(1.1)}
	unnamed := failingObs(noise.PublicKey{9}, 0)
	jobs := p.Due(at(10), []Observation{failingObs(k1, 0), healthy, unnamed})
	if len(jobs) != 1 || jobs[0] != (Job{Key: k1, Host: "a.example"}) {
		t.Fatalf("first due: %+v", jobs)
	}
	// Still failing while the lookup runs: coalesced, even after 10 s.
	for _, s := range []float64{11, 12, 25} {
		if jobs := p.Due(at(s), []Observation{failingObs(k1, 0)}); len(jobs) != 0 {
			t.Fatalf("second lookup while one is in flight at %v: %+v", s, jobs)
		}
	}
	p.Done(k1, nil, errors.New("timeout"), netip.AddrPort{})
	// Done at 25, but the last lookup started at 10: allowed again now.
	if jobs := p.Due(at(25), []Observation{failingObs(k1, 0)}); len(jobs) != 1 {
		t.Fatalf("after the lookup ended, 15 s after it began: %+v", jobs)
	}
	p.Done(k1, nil, errors.New("timeout"), netip.AddrPort{})
	// At most once per 10 s from the last start (25).
	for s := 25.0; s < 35; s += 0.5 {
		if jobs := p.Due(at(s), []Observation{failingObs(k1, 0)}); len(jobs) != 0 {
			t.Fatalf("lookup at %v, within 10 s of the one at 25", s)
		}
	}
	if jobs := p.Due(at(35), []Observation{failingObs(k1, 0)}); len(jobs) != 1 {
		t.Fatalf("no lookup at 35")
	}
}

func TestDone(t *testing.T) {
	p, _ := NewPolicy(map[noise.PublicKey]string{k1: "a.example:51820"}, 0, 0)
	cur := netip.MustParseAddrPort("192.0.2.1:51820")
	a1, a2 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("198.51.100.7")
	if _, ok := p.Done(k1, []netip.Addr{a2, a1}, nil, cur); ok {
		t.Error("changed although the current address is still among the answers")
	}
	if _, ok := p.Done(k1, nil, nil, cur); ok {
		t.Error("changed on an empty answer")
	}
	if _, ok := p.Done(k1, []netip.Addr{a2}, errors.New("servfail"), cur); ok {
		t.Error("changed on an error")
	}
	ap, ok := p.Done(k1, []netip.Addr{netip.MustParseAddr("::ffff:198.51.100.7")}, nil, cur)
	if !ok || ap != netip.MustParseAddrPort("198.51.100.7:51820") {
		t.Errorf("moved name: %v, %v", ap, ok)
	}
	if _, ok := p.Done(k2, []netip.Addr{a2}, nil, cur); ok {
		t.Error("a peer not followed got an endpoint")
	}
}

func TestNewPolicyRejectsBadNames(t *testing.T) {
	p, bad := NewPolicy(map[noise.PublicKey]string{k1: "no-port", k2: ":51820"}, 0, 0)
	if p.Len() != 0 || len(bad) != 2 {
		t.Fatalf("len %d, bad %v", p.Len(), bad)
	}
}
