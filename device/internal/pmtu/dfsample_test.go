package pmtu

import (
	"testing"
	"time"
)

// TestDFSamplesBlackHole: three samples in a row whose segments are sent
// again within SampleWait (each datagram lost with DF set, resent
// fragmented) make a black hole; the stream's other segments in between
// change nothing.
func TestDFSamplesBlackHole(t *testing.T) {
	var s DFSamples
	now := time.Unix(1e6, 0)
	for i := 0; i < SampleLosses; i++ {
		seq := uint32(1000 + i*100000)
		if !s.Take(segment(t, "10.0.0.1", 40000, seq, 1420), now) {
			t.Fatalf("sample %d not taken", i)
		}
		if !s.Pending() {
			t.Fatal("a taken sample is not pending")
		}
		if s.Take(segment(t, "10.0.0.1", 40000, seq+1380, 1420), now) {
			t.Fatal("a second sample within SampleEvery")
		}
		now = now.Add(30 * time.Millisecond)
		if v := s.Seen(segment(t, "10.0.0.1", 40000, seq+1380, 1420), now); v != DFUndecided {
			t.Fatalf("the next segment gave %v", v)
		}
		now = now.Add(20 * time.Millisecond)
		v := s.Seen(segment(t, "10.0.0.1", 40000, seq, 1420), now)
		if want := i == SampleLosses-1; (v == DFBlackHole) != want {
			t.Fatalf("loss %d: verdict %v", i+1, v)
		}
		now = now.Add(SampleEvery)
	}
	if s.Pending() {
		t.Fatal("samples still pending after the verdict")
	}
}

// TestDFSamplesFits: samples never sent again are passes; two in a row
// say the path fits. One loss between passes starts the count again, and
// a pass clears the losses: chance losses never add up to a black hole.
func TestDFSamplesFits(t *testing.T) {
	var s DFSamples
	now := time.Unix(1e6, 0)
	step := func(seq uint32, lose bool) DFVerdict {
		t.Helper()
		if !s.Take(segment(t, "10.0.0.1", 40000, seq, 1420), now) {
			t.Fatalf("sample %d not taken", seq)
		}
		if lose {
			now = now.Add(40 * time.Millisecond)
			if v := s.Seen(segment(t, "10.0.0.1", 40000, seq, 1420), now); v != DFUndecided {
				t.Fatalf("one loss gave %v", v)
			}
		}
		now = now.Add(SampleWait + time.Millisecond)
		return s.Expire(now)
	}
	if v := step(1, false); v != DFUndecided {
		t.Fatalf("one pass gave %v", v)
	}
	step(2, true)
	step(3, true)
	if v := step(4, false); v != DFUndecided {
		t.Fatalf("a pass after losses gave %v", v)
	}
	step(5, true)
	step(6, true)
	if v := step(7, false); v != DFUndecided {
		t.Fatalf("pass gave %v", v)
	}
	if v := step(8, false); v != DFFits {
		t.Fatalf("two passes in a row gave %v", v)
	}
	// A resend seen after SampleWait is Expire's: late, it was no loss.
	s.Take(segment(t, "10.0.0.1", 40000, 9, 1420), now)
	now = now.Add(SampleWait + time.Millisecond)
	if v := s.Seen(segment(t, "10.0.0.1", 40000, 9, 1420), now); v != DFUndecided {
		t.Fatalf("a late resend gave %v", v)
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
		if v := s.Seen(pkt, now); v != DFUndecided {
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
