package pmtu

import (
	"testing"
	"time"
)

// TestDFSamplesBlackHole: three samples in a row whose segments are sent
// again within SampleWait (each datagram lost with DF set, resent
// fragmented) make a black hole; the stream's other segments in between
// change nothing. IPv4 and IPv6, and at the spacing of retransmission
// timeouts (200 ms doubling) as well as of fast retransmits.
func TestDFSamplesBlackHole(t *testing.T) {
	for _, src := range []string{"10.0.0.1", "fd00::1"} {
		for _, rto := range []bool{false, true} {
			dfBlackHole(t, src, rto)
		}
	}
}

func dfBlackHole(t *testing.T, src string, rto bool) {
	var s DFSamples
	now := time.Unix(1e6, 0)
	wait := 20 * time.Millisecond
	for i := 0; i < SampleLosses; i++ {
		seq := uint32(1000 + i*100000)
		if !s.Take(segment(t, src, 40000, seq, 1420), now) {
			t.Fatalf("sample %d not taken", i)
		}
		if !s.Pending() {
			t.Fatal("a taken sample is not pending")
		}
		if s.Take(segment(t, src, 40000, seq+1380, 1420), now) {
			t.Fatal("a second sample within SampleEvery")
		}
		now = now.Add(30 * time.Millisecond)
		if v := s.Seen(segment(t, src, 40000, seq+1380, 1420), now); v {
			t.Fatalf("the next segment gave %v", v)
		}
		if rto {
			wait = 200 * time.Millisecond << i
		}
		now = now.Add(wait)
		v := s.Seen(segment(t, src, 40000, seq, 1420), now)
		if want := i == SampleLosses-1; v != want {
			t.Fatalf("loss %d: verdict %v", i+1, v)
		}
		now = now.Add(SampleEvery)
	}
	if s.Pending() {
		t.Fatal("samples still pending after the verdict")
	}
}

// TestDFSamplesPassesEndLosses: a sample never sent again passes and ends
// a run of losses, so chance losses never add up to a black hole; but a
// pass of a sample taken before the newest lost one (known SampleWait
// late) does not: the path may have narrowed in between.
func TestDFSamplesPassesEndLosses(t *testing.T) {
	var s DFSamples
	now := time.Unix(1e6, 0)
	seq := uint32(1)
	take := func() uint32 {
		t.Helper()
		seq += 1380
		if !s.Take(segment(t, "10.0.0.1", 40000, seq, 1420), now) {
			t.Fatalf("sample %d not taken", seq)
		}
		return seq
	}
	lose := func(q uint32) bool {
		now = now.Add(50 * time.Millisecond)
		return s.Seen(segment(t, "10.0.0.1", 40000, q, 1420), now)
	}
	lose(take())
	now = now.Add(SampleEvery)
	lose(take())
	now = now.Add(SampleEvery)
	take() // passes
	now = now.Add(SampleWait + time.Second)
	s.Expire(now)
	lose(take())
	now = now.Add(SampleEvery)
	if v := lose(take()); v {
		t.Fatalf("two losses after a pass gave %v", v)
	}
	// An old sample, taken before these losses, passes now: it ends
	// nothing, and the next loss is the third in a row.
	now = now.Add(SampleEvery)
	old := dfSample{flow: 1, seq: 7, at: now.Add(-SampleWait - 2*time.Second)}
	s.pend[len(s.pend)-1] = old
	s.Expire(now)
	if v := lose(take()); !v {
		t.Fatalf("third loss in a row gave %v", v)
	}
	// A resend seen after SampleWait is Expire's: late, it was no loss.
	now = now.Add(SampleEvery)
	q := take()
	now = now.Add(SampleWait + time.Millisecond)
	if v := s.Seen(segment(t, "10.0.0.1", 40000, q, 1420), now); v || s.lost != 0 {
		t.Fatalf("a late resend gave %v, %d lost", v, s.lost)
	}
}

// TestDFSamplesTakesOnlyTCPData: pure ACKs, other protocols, garbage and
// a resend of a pending sample are never samples; no more than
// SamplesPending wait at once.
func TestDFSamplesTakesOnlyTCPData(t *testing.T) {
	var s DFSamples
	now := time.Unix(1e6, 0)
	ack := segment(t, "10.0.0.1", 40000, 5, 40)
	for _, pkt := range [][]byte{nil, {0x45}, make([]byte, 1420), ack} {
		if s.Take(pkt, now) {
			t.Fatalf("took %x...", pkt[:min(len(pkt), 4)])
		}
		if v := s.Seen(pkt, now); v {
			t.Fatalf("seen gave %v", v)
		}
	}
	seg := segment(t, "10.0.0.1", 40000, 5, 1420)
	if !s.Take(seg, now) {
		t.Fatal("not taken")
	}
	now = now.Add(SampleEvery)
	if s.Take(seg, now) {
		t.Fatal("a resend of a pending sample taken as a new one")
	}
	for i := 1; i < SamplesPending; i++ {
		if !s.Take(segment(t, "10.0.0.1", 40000, uint32(5+i*1380), 1420), now) {
			t.Fatalf("sample %d not taken", i)
		}
		now = now.Add(SampleEvery)
	}
	if s.Take(segment(t, "10.0.0.1", 40000, 99999, 1420), now) {
		t.Fatal("more than SamplesPending pending")
	}
}

// FuzzDFSamples: whatever the bytes (a packet read from the TUN), Take and
// Seen never panic, and Seen's quick look agrees with the full parse on
// every packet Take accepts: a sample taken is always one Seen can find.
func FuzzDFSamples(f *testing.F) {
	f.Add(segment(f, "10.0.0.1", 40000, 5, 1420), uint8(0))
	f.Add(segment(f, "fd00::1", 40000, 5, 1420), uint8(3))
	f.Add([]byte{0x46, 0, 0, 40}, uint8(1))
	f.Fuzz(func(t *testing.T, pkt []byte, cut uint8) {
		var s DFSamples
		now := time.Unix(1e6, 0)
		s.Seen(pkt, now)
		if s.Take(pkt, now) {
			now = now.Add(SampleEvery)
			s.Seen(pkt, now)
			if s.lost != 1 {
				t.Fatalf("a taken sample sent again was not seen: %d lost", s.lost)
			}
		}
		if int(cut) < len(pkt) {
			s.Take(pkt[:cut], now)
			s.Seen(pkt[:cut], now)
		}
		s.Expire(now.Add(SampleWait + time.Second))
	})
}
