package pmtu

import (
	"testing"
	"time"
)

// simulate runs p against a path that carries plaintexts up to carries
// (answering peer unless silent), with a 10 ms round trip, polling at Due
// as the device does, until until; it returns the probes sent.
func simulate(p *Prober, now *time.Time, until time.Time, carries int, silent bool) (probes []int) {
	for now.Before(until) {
		size := p.Poll(*now)
		if size > 0 {
			probes = append(probes, size)
			if !silent && size <= carries {
				*now = now.Add(10 * time.Millisecond)
				if p.Acked(size, *now) {
					continue
				}
			}
		}
		if d := p.Due(); d.After(*now) {
			*now = d
		}
	}
	return probes
}

func TestProberFullPath(t *testing.T) {
	now := time.Unix(1e6, 0)
	p := NewProber(ProberOptions{Min: 1232, Max: 1420}, now)
	probes := simulate(p, &now, now.Add(time.Minute), 1420, false)
	if p.Result() != 1420 || len(probes) != 1 {
		t.Fatalf("result %d after probes %v, want 1420 after one", p.Result(), probes)
	}
}

// TestProberNarrowPath: a path carrying 1260 bytes of plaintext is found
// to within one step, with a bounded number of probes, none above Max or
// below Min, in a few seconds.
func TestProberNarrowPath(t *testing.T) {
	for _, carries := range []int{1232, 1240, 1260, 1300, 1419} {
		now := time.Unix(1e6, 0)
		p := NewProber(ProberOptions{Min: 1232, Max: 1420}, now)
		probes := simulate(p, &now, now.Add(time.Minute), carries, false)
		if r := p.Result(); r > carries || r <= carries-step {
			t.Fatalf("carries %d: result %d (probes %v)", carries, r, probes)
		}
		if len(probes) > 20 {
			t.Fatalf("carries %d: %d probes: %v", carries, len(probes), probes)
		}
		for _, s := range probes {
			if s < 1232 || s > 1420 {
				t.Fatalf("probe of %d outside [1232, 1420]", s)
			}
		}
		if p.Searching() {
			t.Fatalf("carries %d: still searching", carries)
		}
	}
}

// TestProberSilentPeer: a peer that answers nothing (stock WireGuard)
// costs three probes of each of two sizes, then none for RaiseInterval.
func TestProberSilentPeer(t *testing.T) {
	now := time.Unix(1e6, 0)
	p := NewProber(ProberOptions{Min: 1232, Max: 1420}, now)
	probes := simulate(p, &now, now.Add(9*time.Minute), 0, true)
	want := []int{1420, 1420, 1420, 1232, 1232, 1232}
	if len(probes) != len(want) {
		t.Fatalf("probes %v, want %v", probes, want)
	}
	for i := range want {
		if probes[i] != want[i] {
			t.Fatalf("probes %v, want %v", probes, want)
		}
	}
	if p.Result() != 0 {
		t.Fatalf("result %d, want 0 (unknown)", p.Result())
	}
}

// TestProberRaiseAndShrink: a completed search is repeated after
// RaiseInterval and follows the path up; Reset (a new endpoint) searches
// again at once and follows it down.
func TestProberRaiseAndShrink(t *testing.T) {
	now := time.Unix(1e6, 0)
	p := NewProber(ProberOptions{Min: 1232, Max: 1420, RaiseInterval: time.Minute}, now)
	simulate(p, &now, now.Add(30*time.Second), 1260, false)
	if r := p.Result(); r > 1260 || r <= 1244 {
		t.Fatalf("result %d, want about 1260", r)
	}
	simulate(p, &now, now.Add(2*time.Minute), 1420, false)
	if p.Result() != 1420 {
		t.Fatalf("after the path grew: %d, want 1420", p.Result())
	}
	p.Reset(now)
	if p.Result() != 0 {
		t.Fatal("Reset kept the old result")
	}
	simulate(p, &now, now.Add(30*time.Second), 1300, false)
	if r := p.Result(); r > 1300 || r <= 1284 {
		t.Fatalf("after Reset: %d, want about 1300", r)
	}
	// A late answer to a probe counted lost still counts.
	q := NewProber(ProberOptions{Min: 1232, Max: 1420}, now)
	for range 3 {
		q.Poll(now)
		now = now.Add(time.Second)
	}
	q.Acked(1420, now)
	if q.Result() != 1420 || q.Searching() {
		t.Fatalf("late answer: result %d, searching %v", q.Result(), q.Searching())
	}
}

func TestProbeMessages(t *testing.T) {
	pr := AppendProbe([]byte("x"), 1300)[1:]
	if len(pr) != 1300 || !IsControl(pr) {
		t.Fatalf("probe of %d bytes", len(pr))
	}
	if s, probe, err := ParseControl(pr); err != nil || !probe || s != 1300 {
		t.Fatalf("probe parsed as %d %v %v", s, probe, err)
	}
	if _, _, err := ParseControl(pr[:1200]); err == nil {
		t.Fatal("a truncated probe parsed")
	}
	ack := AppendAck(nil, 1300)
	if s, probe, err := ParseControl(ack); err != nil || probe || s != 1300 || len(ack) != 16 {
		t.Fatalf("ack parsed as %d %v %v (%d bytes)", s, probe, err, len(ack))
	}
	for _, bad := range [][]byte{nil, {0}, make([]byte, 64), {0x45, 'f', 'p', 1, 0, 8, 0, 0}, {0, 'f', 'p', 9, 0, 8, 0, 0}} {
		if _, _, err := ParseControl(bad); err == nil {
			t.Fatalf("%x parsed", bad)
		}
	}
}

func FuzzParseControl(f *testing.F) {
	f.Add(AppendAck(nil, 1300))
	f.Add(AppendProbe(nil, 64))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, probe, err := ParseControl(b)
		if err == nil && probe && s != len(b) {
			t.Fatalf("probe naming %d in %d bytes", s, len(b))
		}
	})
}

// TestProberConfirmFindsShrink: between searches the size found is probed
// once every ConfirmInterval; a path that shrinks loses it three times and
// a new search finds the new size long before RaiseInterval.
func TestProberConfirmFindsShrink(t *testing.T) {
	now := time.Unix(1e6, 0)
	p := NewProber(ProberOptions{Min: 1200, Max: 1420, ConfirmInterval: 10 * time.Second}, now)
	if probes := simulate(p, &now, now.Add(5*time.Second), 1420, false); len(probes) != 1 {
		t.Fatalf("full path: probes %v, want one", probes)
	}
	probes := simulate(p, &now, now.Add(time.Minute), 1420, false)
	if len(probes) != 6 || p.Result() != 1420 {
		t.Fatalf("a minute of confirmations: probes %v (result %d), want six of 1420", probes, p.Result())
	}
	simulate(p, &now, now.Add(time.Minute), 1240, false)
	if r := p.Result(); r > 1240 || r <= 1224 {
		t.Fatalf("a minute after the path shrank: result %d, want about 1240", r)
	}
}

// TestProberTopIsFloor: a search whose top size is answered has found a
// floor, not the path's limit (nothing larger was tried); a search that
// lost a larger size has found the limit.
func TestProberTopIsFloor(t *testing.T) {
	now := time.Unix(1e6, 0)
	p := NewProber(ProberOptions{Min: 1232, Max: 1420}, now)
	simulate(p, &now, now.Add(time.Minute), 1460, false)
	if p.Result() != 1420 || p.Capped() {
		t.Fatalf("result %d, capped %v: want 1420, a floor", p.Result(), p.Capped())
	}
	q := NewProber(ProberOptions{Min: 1232, Max: 1420}, now)
	simulate(q, &now, now.Add(time.Minute), 1300, false)
	if !q.Capped() {
		t.Fatalf("result %d after a lost 1420 is not the limit", q.Result())
	}
}

// TestProberRaise: raising the top (the tunnel MTU grew) keeps what was
// found as a floor and searches upward from it at once: no probe below
// the floor, and the new limit found.
func TestProberRaise(t *testing.T) {
	for _, c := range []struct{ carries, want int }{{1420, 1420}, {1460, 1456}, {1500, 1500}, {9000, 1500}} {
		carries, want := c.carries, c.want
		now := time.Unix(1e6, 0)
		p := NewProber(ProberOptions{Min: 1232, Max: 1420, RaiseInterval: time.Hour}, now)
		simulate(p, &now, now.Add(time.Minute), carries, false)
		p.SetMax(1500, now)
		if p.Result() != 1420 || p.Capped() || !p.Searching() || p.Due().After(now) {
			t.Fatalf("carries %d: after the raise: result %d capped %v searching %v due in %v", carries,
				p.Result(), p.Capped(), p.Searching(), p.Due().Sub(now))
		}
		probes := simulate(p, &now, now.Add(time.Minute), carries, false)
		for _, s := range probes {
			if s < 1420 || s > 1500 {
				t.Fatalf("carries %d: probe of %d outside [1420, 1500]: %v", carries, s, probes)
			}
		}
		if r := p.Result(); r != want || p.Searching() {
			t.Fatalf("carries %d: result %d (searching %v) after %v, want %d", carries, r, p.Searching(), probes, want)
		}
		if p.Capped() != (carries < 1500) {
			t.Fatalf("carries %d: capped %v", carries, p.Capped())
		}
		// Lowered again: what carried more carries the new top.
		p.SetMax(1400, now)
		if r := p.Result(); r != 1400 || p.Searching() {
			t.Fatalf("carries %d: lowered to 1400: result %d searching %v", carries, r, p.Searching())
		}
	}
}

// found runs p against a path carrying carries with a round trip of rtt
// until its result is the path's limit (within one step) and returns how
// long that took, failing past limit.
func found(t *testing.T, p *Prober, now *time.Time, carries int, rtt, limit time.Duration) time.Duration {
	t.Helper()
	start := *now
	for p.Result() > carries || p.Result() <= carries-step || !p.Capped() {
		if now.Sub(start) > limit {
			t.Fatalf("carries %d: after %v result %d (capped %v), want the limit within %v", carries, now.Sub(start), p.Result(), p.Capped(), limit)
		}
		size := p.Poll(*now)
		if size > 0 && size <= carries {
			*now = now.Add(rtt)
			if p.Acked(size, *now) {
				continue
			}
		}
		if d := p.Due(); d.After(*now) {
			*now = d
		} else if size == 0 {
			*now = now.Add(time.Millisecond)
		}
	}
	return now.Sub(start)
}

// TestProberBlackHoleFast: a path that silently drops the tunnel's MTU
// is found within two seconds of the first probe: the tunnel-MTU probes
// time out quickly, and once an answer measured the round trip, losses
// are judged in a few round trips instead of seconds.
func TestProberBlackHoleFast(t *testing.T) {
	for _, carries := range []int{1232, 1260, 1300, 1404} {
		now := time.Unix(1e6, 0)
		p := NewProber(ProberOptions{Min: 1232, Max: 1420}, now)
		found(t, p, &now, carries, 10*time.Millisecond, 2*time.Second)
	}
}

// TestProberShrinkFast: a busy path that shrinks is found within five
// seconds with confirmations every 3 s: a lost confirmation goes straight
// to the search below it, not back to the tunnel's MTU.
func TestProberShrinkFast(t *testing.T) {
	now := time.Unix(1e6, 0)
	p := NewProber(ProberOptions{Min: 1216, Max: 1420, ConfirmInterval: 3 * time.Second}, now)
	simulate(p, &now, now.Add(7*time.Second), 1420, false)
	if p.Result() != 1420 {
		t.Fatalf("result %d", p.Result())
	}
	found(t, p, &now, 1240, 10*time.Millisecond, 5*time.Second)
}

// TestProberSlowPath: on a path whose round trip exceeds the first
// timeout, late answers still count: the full tunnel MTU is found, with
// a bounded number of probes.
func TestProberSlowPath(t *testing.T) {
	now := time.Unix(1e6, 0)
	p := NewProber(ProberOptions{Min: 1232, Max: 1420}, now)
	var probes int
	for start := now; now.Sub(start) < 30*time.Second; {
		if size := p.Poll(now); size > 0 {
			probes++
			// Answered 600 ms later: deliver at the next poll past it.
			at := now.Add(600 * time.Millisecond)
			for p.Due().Before(at) {
				now = p.Due()
				if s := p.Poll(now); s > 0 {
					probes++
				}
			}
			now = at
			p.Acked(size, now)
			continue
		}
		now = p.Due()
	}
	if p.Result() != 1420 || probes > 8 {
		t.Fatalf("result %d after %d probes, want 1420 after a few", p.Result(), probes)
	}
}

// TestProberLateAnswerAfterSearch: an answer that comes after its probe
// was judged lost and the search ended still raises what was found: the
// path carried it (short timeouts cost probes, never a wrong result).
func TestProberLateAnswerAfterSearch(t *testing.T) {
	now := time.Unix(1e6, 0)
	p := NewProber(ProberOptions{Min: 1232, Max: 1420}, now)
	var sent []int
	for p.Searching() {
		size := p.Poll(now)
		if size > 0 {
			sent = append(sent, size)
			if size <= 1232 { // only the base is answered in time
				now = now.Add(10 * time.Millisecond)
				p.Acked(size, now)
				continue
			}
		}
		now = p.Due()
	}
	if p.Result() != 1232 {
		t.Fatalf("result %d after %v, want 1232", p.Result(), sent)
	}
	p.Acked(1328, now) // the answer to a probe sent during the search
	if p.Result() != 1328 || p.Searching() {
		t.Fatalf("after a late answer of 1328: result %d, searching %v", p.Result(), p.Searching())
	}
}
