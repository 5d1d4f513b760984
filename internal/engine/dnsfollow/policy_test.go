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

// Failure counts from the first unanswered initiation, though each
// retransmission renews LastInitiation; a completed handshake resets it.
func TestFailureCountsFromFirstUnansweredInitiation(t *testing.T) {
	p, _ := NewPolicy(map[noise.PublicKey]string{k1: "a.example:1"}, 0, 0)
	obs := func(init, hs float64) []Observation {
		return []Observation{{Key: k1, LastInitiation: at(init), LastHandshake: at(hs)}}
	}
	if jobs := p.Due(at(100), []Observation{{Key: k1}}, 10); len(jobs) != 0 {
		t.Fatal("due without any initiation")
	}
	if jobs := p.Due(at(100), obs(1, 1.1), 10); len(jobs) != 0 {
		t.Fatal("due although the initiation was answered")
	}
	// Initiations at 10, 15, 20 (retransmissions), never answered.
	for _, c := range []struct {
		now, init float64
		want      int
	}{{10.5, 10, 0}, {14.9, 10, 0}, {15.2, 15, 1}} {
		if jobs := p.Due(at(c.now), obs(c.init, -1), 10); len(jobs) != c.want {
			t.Fatalf("at %v (last initiation %v): %d due, want %d", c.now, c.init, len(jobs), c.want)
		}
	}
	p.Done(Job{Key: k1, Host: "a.example"}, nil, errors.New("x"), netip.AddrPort{})
	// Answered at 21: the clock restarts with the next unanswered one.
	p.Due(at(22), obs(20, 21), 10)
	if jobs := p.Due(at(30), obs(29, 21), 10); len(jobs) != 0 {
		t.Fatal("due 1 s after a new unanswered initiation")
	}
	if jobs := p.Due(at(34.5), obs(34, 21), 10); len(jobs) != 1 {
		t.Fatal("not due 5 s after the first unanswered initiation (29)")
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
	jobs := p.Due(at(10), []Observation{failingObs(k1, 0), healthy, unnamed}, 100)
	if len(jobs) != 1 || jobs[0] != (Job{Key: k1, Host: "a.example"}) {
		t.Fatalf("first due: %+v", jobs)
	}
	// Still failing while the lookup runs: coalesced, even after 10 s.
	for _, s := range []float64{11, 12, 25} {
		if jobs := p.Due(at(s), []Observation{failingObs(k1, 0)}, 100); len(jobs) != 0 {
			t.Fatalf("second lookup while one is in flight at %v: %+v", s, jobs)
		}
	}
	p.Done(Job{Key: k1, Host: "a.example"}, nil, errors.New("timeout"), netip.AddrPort{})
	// Done at 25, but the last lookup started at 10: allowed again now.
	if jobs := p.Due(at(25), []Observation{failingObs(k1, 0)}, 100); len(jobs) != 1 {
		t.Fatalf("after the lookup ended, 15 s after it began: %+v", jobs)
	}
	p.Done(Job{Key: k1, Host: "a.example"}, nil, errors.New("timeout"), netip.AddrPort{})
	// At most once per 10 s from the last start (25).
	for s := 25.0; s < 35; s += 0.5 {
		if jobs := p.Due(at(s), []Observation{failingObs(k1, 0)}, 100); len(jobs) != 0 {
			t.Fatalf("lookup at %v, within 10 s of the one at 25", s)
		}
	}
	if jobs := p.Due(at(35), []Observation{failingObs(k1, 0)}, 100); len(jobs) != 1 {
		t.Fatalf("no lookup at 35")
	}
}

func TestDone(t *testing.T) {
	p, _ := NewPolicy(map[noise.PublicKey]string{k1: "a.example:51820"}, 0, 0)
	cur := netip.MustParseAddrPort("192.0.2.1:51820")
	a1, a2 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("198.51.100.7")
	if _, ok := p.Done(Job{Key: k1, Host: "a.example"}, []netip.Addr{a2, a1}, nil, cur); ok {
		t.Error("changed although the current address is still among the answers")
	}
	if _, ok := p.Done(Job{Key: k1, Host: "a.example"}, nil, nil, cur); ok {
		t.Error("changed on an empty answer")
	}
	if _, ok := p.Done(Job{Key: k1, Host: "a.example"}, []netip.Addr{a2}, errors.New("servfail"), cur); ok {
		t.Error("changed on an error")
	}
	ap, ok := p.Done(Job{Key: k1, Host: "a.example"}, []netip.Addr{netip.MustParseAddr("::ffff:198.51.100.7")}, nil, cur)
	if !ok || ap != netip.MustParseAddrPort("198.51.100.7:51820") {
		t.Errorf("moved name: %v, %v", ap, ok)
	}
	if _, ok := p.Done(Job{Key: k2, Host: "b.example"}, []netip.Addr{a2}, nil, cur); ok {
		t.Error("a peer not followed got an endpoint")
	}
}

func TestNewPolicyRejectsBadNames(t *testing.T) {
	p, bad := NewPolicy(map[noise.PublicKey]string{k1: "no-port", k2: ":51820"}, 0, 0)
	if p.Len() != 0 || len(bad) != 2 {
		t.Fatalf("len %d, bad %v", p.Len(), bad)
	}
}

// Sync keeps the state of unchanged names, drops removed ones, and a
// renamed peer starts afresh; a lookup of the old name changes nothing.
func TestSync(t *testing.T) {
	p, _ := NewPolicy(map[noise.PublicKey]string{k1: "a.example:51820", k2: "b.example:1"}, 0, 0)
	if jobs := p.Due(at(10), []Observation{failingObs(k1, 0), failingObs(k2, 0)}, 1); len(jobs) != 1 {
		t.Fatalf("max 1: %+v", jobs)
	}
	p.Sync(map[noise.PublicKey]string{k1: "a.example:51820"})
	if p.Len() != 1 {
		t.Fatalf("len %d after dropping k2", p.Len())
	}
	// k1 unchanged: its lookup is still in flight, so nothing is due.
	if jobs := p.Due(at(30), []Observation{failingObs(k1, 0)}, 100); len(jobs) != 0 {
		t.Fatalf("unchanged name lost its in-flight state: %+v", jobs)
	}
	p.Sync(map[noise.PublicKey]string{k1: "c.example:51820"})
	if _, ok := p.Done(Job{Key: k1, Host: "a.example"}, []netip.Addr{netip.MustParseAddr("192.0.2.9")}, nil, netip.AddrPort{}); ok {
		t.Fatal("the old name's answer applied after a rename")
	}
	if jobs := p.Due(at(31), []Observation{failingObs(k1, 0)}, 100); len(jobs) != 1 || jobs[0].Host != "c.example" {
		t.Fatalf("renamed peer: %+v", jobs)
	}
	if bad := p.Sync(map[noise.PublicKey]string{k1: "nonsense"}); len(bad) != 1 || p.Len() != 0 {
		t.Fatalf("bad name: %v, len %d", bad, p.Len())
	}
}
