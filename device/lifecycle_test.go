package device

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/tun/memtun"
)

// The device acts on the protocol's timers at the exact times (fake clock,
// testing/synctest): a passive keepalive KeepaliveTimeout after data that
// was not answered, a new handshake on the first send after RekeyAfterTime,
// and every key zeroed 3 x RejectAfterTime after the last new session.
func TestLifecycleTimersAreExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := memPair(t, membind.NetOptions{})
		ta := a.tun.(*memtun.Device)
		count := func(n *node, name string) uint64 {
			synctest.Wait()
			return counter(n.dev.Status(), name)
		}
		start := time.Now()
		ta.Inject(udpPacket(addrA, addrB, 1, 100))
		synctest.Wait()
		next(t, b.tun, time.Second)
		if c := count(a, "handshakes_completed"); c != 1 {
			t.Fatalf("handshakes completed %d, want 1", c)
		}

		// b got data and sends nothing back: its keepalive is due exactly
		// KeepaliveTimeout later.
		time.Sleep(noise.KeepaliveTimeout - time.Millisecond)
		if c := count(b, "keepalives_sent"); c != 0 {
			t.Fatalf("b sent %d keepalives 1 ms before the timeout, want 0", c)
		}
		time.Sleep(time.Millisecond)
		if c := count(b, "keepalives_sent"); c != 1 {
			t.Fatalf("b sent %d keepalives at the timeout, want 1", c)
		}

		// a sends just before RekeyAfterTime: no new handshake; just after:
		// one.
		time.Sleep(time.Until(start.Add(noise.RekeyAfterTime - time.Second)))
		ta.Inject(udpPacket(addrA, addrB, 2, 100))
		next(t, b.tun, time.Second)
		if c := count(a, "handshake_initiations_sent"); c != 1 {
			t.Fatalf("a sent %d initiations before RekeyAfterTime, want 1", c)
		}
		time.Sleep(2 * time.Second)
		ta.Inject(udpPacket(addrA, addrB, 3, 100))
		next(t, b.tun, time.Second)
		if c := count(a, "handshake_initiations_sent"); c != 2 {
			t.Fatalf("a sent %d initiations after RekeyAfterTime, want 2", c)
		}
		rekeyed := time.Now()

		// Silence: keys are zeroed 3 x RejectAfterTime after the newest
		// session, on both sides, and not a moment before.
		time.Sleep(time.Until(rekeyed.Add(3*noise.RejectAfterTime - time.Second)))
		if c := count(a, "keys_zeroed"); c != 0 {
			t.Fatalf("a zeroed keys %d times a second early", c)
		}
		time.Sleep(2 * time.Second)
		if ca, cb := count(a, "keys_zeroed"), count(b, "keys_zeroed"); ca != 1 || cb != 1 {
			t.Fatalf("keys zeroed a=%d b=%d after 3 x RejectAfterTime, want 1 each", ca, cb)
		}
	})
}
