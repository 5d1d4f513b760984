package e2e

import (
	"testing"
	"time"
)

// Shortened protocol times for the rekey test, kept in the paper's order:
// rekey at 3 s, reject at 9 s, and the receive-side rekey point
// (reject - keepalive - rekey timeout) at 5 s, after the send-side one.
var rekeyEnv = []string{
	"FIPS_GO_TEST_REKEY_AFTER_TIME=3s",
	"FIPS_GO_TEST_REJECT_AFTER_TIME=9s",
	"FIPS_GO_TEST_KEEPALIVE_TIMEOUT=2s",
	"FIPS_GO_TEST_REKEY_TIMEOUT=2s",
}

// TestRekeyUnderTraffic: with fips-go built with -tags fipsgo_testtimers and
// keys that must be renewed every 3 s (rejected after 9 s), an 18 s TCP
// stream arrives byte-exact; during it A (the initiator) completes at least
// 4 new handshakes, B answers them, wg show's latest handshake moves at
// least 4 times, and neither side drops a data packet for a key reason
// (unknown index, expired keypair, failed decryption, replay).
func TestRekeyUnderTraffic(t *testing.T) {
	requireRoot(t)
	im := fipsGoTimers(t, rekeyEnv...)
	p := newPair(t, pairOpts{implA: im, implB: im})
	p.a.ns.waitPing(p.b.tun4, 20*time.Second)
	a0, b0 := p.a.counters(), p.b.counters()

	source, sink := startTCP(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5001),
		helperSpec{Duration: 18 * time.Second, Rate: 12 << 20, Seed: 3, Timeout: 2 * time.Minute})
	stamps := map[int64]bool{}
	for !source.finished() {
		stamps[p.b.peer(p.a).handshake] = true
		time.Sleep(500 * time.Millisecond)
	}
	got := finishTCP(t, source, sink, 0)
	t.Logf("TCP stream of %s intact across rekeys, %.0f Mbit/s", fmtBytes(got.Bytes), mbit(got.Bytes, got.Seconds))
	if got.Bytes < 18*(12<<20)/2 {
		t.Errorf("only %s went through in 18 s at a 12 MiB/s pace", fmtBytes(got.Bytes))
	}

	a1, b1 := p.a.counters(), p.b.counters()
	done := a1["handshakes_completed"] - a0["handshakes_completed"]
	answered := b1["handshake_responses_sent"] - b0["handshake_responses_sent"]
	t.Logf("during the stream: A completed %d handshakes, B answered %d, B saw %d distinct latest-handshake times",
		done, answered, len(stamps))
	if done < 4 || answered < 4 || len(stamps) < 4 {
		t.Errorf("want at least 4 rekeys in 18 s with REKEY_AFTER_TIME=3s")
	}
	for _, side := range []struct {
		name          string
		before, after map[string]uint64
	}{{"A", a0, a1}, {"B", b0, b1}} {
		t.Logf("%s counters: %v", side.name, nonZero(side.after))
		for _, k := range []string{"rx_drop_unknown_index", "rx_drop_expired_keypair",
			"rx_drop_decrypt_failed", "rx_drop_replayed", "handshake_attempts_gave_up"} {
			if d := side.after[k] - side.before[k]; d != 0 {
				t.Errorf("%s: %s went up by %d during the rekeys, want 0", side.name, k, d)
			}
		}
	}
}
