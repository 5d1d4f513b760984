package srclimit

import (
	"net/netip"
	"testing"
	"time"
)

var t0 = time.Unix(1_000_000, 0)

// A burst of Burst is allowed at once and no more; then one per Every,
// however often the source was refused in between.
func TestAllowBurstThenRate(t *testing.T) {
	l := New(Options{Burst: 3, Every: time.Second})
	a := netip.MustParseAddr("192.0.2.1")
	for i := range 3 {
		if !l.Allow(a, t0) {
			t.Fatalf("event %d of the burst refused", i+1)
		}
	}
	for i := range 100 {
		if l.Allow(a, t0.Add(time.Duration(i)*time.Millisecond)) {
			t.Fatalf("event past the burst allowed at +%d ms", i)
		}
	}
	if l.Allow(a, t0.Add(999*time.Millisecond)) {
		t.Fatal("allowed before a token came back")
	}
	if !l.Allow(a, t0.Add(time.Second)) {
		t.Fatal("refused once a token came back")
	}
	if l.Allow(a, t0.Add(time.Second)) {
		t.Fatal("two events on one token")
	}
	// Idle long enough, the bucket is full again, and no fuller.
	later := t0.Add(time.Hour)
	for i := range 3 {
		if !l.Allow(a, later) {
			t.Fatalf("after an idle hour, event %d refused", i+1)
		}
	}
	if l.Allow(a, later) {
		t.Fatal("an idle hour filled the bucket past its burst")
	}
}

// A source hammering at its limit gets exactly the steady rate.
func TestAllowSteadyRate(t *testing.T) {
	l := New(Options{Burst: 8, Every: 250 * time.Millisecond})
	a := netip.MustParseAddr("198.51.100.7")
	allowed := 0
	for ms := 0; ms < 60_000; ms++ { // one attempt a millisecond for a minute
		if l.Allow(a, t0.Add(time.Duration(ms)*time.Millisecond)) {
			allowed++
		}
	}
	// The burst, then one every 250 ms: 8 + 59.999/0.25.
	if want := 8 + 239; allowed != want {
		t.Fatalf("allowed %d in a minute of hammering, want %d", allowed, want)
	}
}

// A client that reconnects as clients do is never limited: two
// connections at once (the TCP and TLS race) a few times a minute, and a
// burst of reconnects after a network change.
func TestAllowNormalClient(t *testing.T) {
	l := New(Options{})
	a := netip.MustParseAddr("203.0.113.5")
	now := t0
	for i := range 240 { // an hour
		for range 2 {
			if !l.Allow(a, now) {
				t.Fatalf("race at +%v refused", now.Sub(t0))
			}
		}
		if i%20 == 0 { // now and then three more right after
			for j := range 3 {
				if !l.Allow(a, now.Add(time.Duration(j+1)*100*time.Millisecond)) {
					t.Fatalf("reconnect %d at +%v refused", j+1, now.Sub(t0))
				}
			}
		}
		now = now.Add(15 * time.Second)
	}
}

// Sources are told apart by IPv4 address and IPv6 /64: another address is
// not limited by the first one's burst, another host in the same /64 is.
func TestAllowPerPrefix(t *testing.T) {
	l := New(Options{Burst: 1, Every: time.Hour})
	for _, c := range []struct {
		a    string
		want bool
	}{
		{"192.0.2.1", true},
		{"192.0.2.1", false},
		{"::ffff:192.0.2.1", false}, // the same address, mapped
		{"192.0.2.2", true},
		{"2001:db8:1:2::1", true},
		{"2001:db8:1:2:ffff::9", false}, // the same /64
		{"fe80::1%eth0", true},
		{"fe80::2%eth1", false},
		{"2001:db8:1:3::1", true}, // the next /64
	} {
		if got := l.Allow(netip.MustParseAddr(c.a), t0); got != c.want {
			t.Errorf("%s: allowed %v, want %v", c.a, got, c.want)
		}
	}
	if l.Len() != 5 {
		t.Errorf("%d sources remembered, want 5", l.Len())
	}
}

// The table keeps at most Sources entries, forgetting the one used least
// recently; a source it forgot starts again with a full bucket, and one
// used recently keeps its state.
func TestAllowTableCap(t *testing.T) {
	l := New(Options{Burst: 1, Every: time.Hour, Sources: 4})
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}) }
	for i := range 4 {
		l.Allow(addr(i), t0)
	}
	// Source 0 is used again (refused): now the most recent.
	if l.Allow(addr(0), t0) {
		t.Fatal("source 0 allowed twice")
	}
	for i := 4; i < 7; i++ { // push out 1, 2, 3
		if !l.Allow(addr(i), t0) {
			t.Fatalf("new source %d refused", i)
		}
	}
	if l.Len() != 4 {
		t.Fatalf("%d sources remembered, cap 4", l.Len())
	}
	if l.Allow(addr(0), t0) {
		t.Fatal("source 0 was forgotten though used recently")
	}
	if !l.Allow(addr(1), t0) {
		t.Fatal("source 1, forgotten, was refused")
	}
	// Many more sources than the cap: the table stays at its cap.
	for i := 100; i < 5000; i++ {
		if !l.Allow(addr(i), t0) {
			t.Fatalf("unseen source %d refused", i)
		}
	}
	if l.Len() != 4 || len(l.ents) != 4 {
		t.Fatalf("table grew to %d (%d entries) past its cap of 4", l.Len(), len(l.ents))
	}
	checkList(t, l)
}

// checkList walks the recency list both ways: every entry once, linked
// consistently, and the index agrees.
func checkList(t *testing.T, l *Limiter) {
	t.Helper()
	n, prev := 0, int32(-1)
	for i := l.head; i >= 0; i = l.ents[i].next {
		if l.ents[i].prev != prev {
			t.Fatalf("entry %d: prev %d, want %d", i, l.ents[i].prev, prev)
		}
		if l.idx[l.ents[i].key] != i {
			t.Fatalf("entry %d not indexed under its key", i)
		}
		prev = i
		if n++; n > len(l.ents) {
			t.Fatal("the recency list loops")
		}
	}
	if l.tail != prev || n != len(l.idx) {
		t.Fatalf("list of %d ends at %d; index holds %d, tail %d", n, prev, len(l.idx), l.tail)
	}
}

// The zero Options give the documented defaults.
func TestOptionsDefaults(t *testing.T) {
	l := New(Options{})
	if l.every != DefaultEvery || l.burst != DefaultBurst*DefaultEvery || l.max != DefaultSources {
		t.Fatalf("defaults: every %v, burst %v, sources %d", l.every, l.burst, l.max)
	}
}

// Steady state allocates nothing: a known source, and a new one once the
// table is full.
func TestAllowAllocs(t *testing.T) {
	l := New(Options{Sources: 16})
	for i := range 16 {
		l.Allow(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), t0)
	}
	i := 0
	n := testing.AllocsPerRun(1000, func() {
		i++
		l.Allow(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), t0)
		l.Allow(netip.AddrFrom4([4]byte{10, 0, 0, 1}), t0)
	})
	if n != 0 {
		t.Fatalf("%v allocations per call", n)
	}
}
