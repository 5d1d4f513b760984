package device

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"
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

// Peer removal and re-adding, and MTU changes, under traffic, on a fake
// clock: every datagram on the wire authenticates, what arrives arrives in
// the order it was sent (the sequencers keep order across the changes;
// in-flight packets of the removed peer are dropped, never reordered), and
// traffic resumes after each change.
func TestLifecycleRemovalAndMTUUnderTraffic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, aa, ab := auditedPair(t)
		ta, tb := a.tun.(*memtun.Device), b.tun.(*memtun.Device)
		stop := make(chan struct{})
		sent := make(chan uint32, 1)
		go func() { // 16 packets every millisecond of fake time
			var seq uint32
			defer func() { sent <- seq }()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for range 16 {
					seq++
					mtu, _ := ta.MTU()
					ta.Inject(udpPacket(addrA, addrB, seq, min(mtu, 1420)-28))
				}
				time.Sleep(time.Millisecond)
			}
		}()
		var mu sync.Mutex // guards got
		var got []uint32
		arrived := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(got)
		}
		recvDone := make(chan struct{})
		go func() {
			defer close(recvDone)
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				pkt, err := tb.Next(ctx)
				cancel()
				if err != nil {
					return
				}
				mu.Lock()
				got = append(got, binary.BigEndian.Uint32(pkt[28:]))
				mu.Unlock()
			}
		}()
		arrivedAfter := func(what string) {
			t.Helper()
			synctest.Wait()
			n := arrived()
			time.Sleep(50 * time.Millisecond)
			synctest.Wait()
			if arrived() <= n {
				t.Fatalf("no traffic in the 50 ms after %s", what)
			}
		}
		time.Sleep(50 * time.Millisecond)
		arrivedAfter("the start")

		pub, ep := b.key.PublicKey(), b.ep
		if err := a.dev.Apply(&Config{Peers: []PeerConfig{{PublicKey: pub, Remove: true}}}); err != nil {
			t.Fatal(err)
		}
		if err := a.dev.Apply(&Config{Peers: []PeerConfig{{PublicKey: pub, Endpoint: &ep,
			AllowedIPs: []AllowedIPChange{{Prefix: netip.PrefixFrom(addrB, 32)}}}}}); err != nil {
			t.Fatal(err)
		}
		arrivedAfter("the peer was removed and added again")

		for _, mtu := range []int{9000, 1280, 1420} {
			tb.SetMTU(mtu)
			ta.SetMTU(mtu)
			arrivedAfter(fmt.Sprintf("MTU %d", mtu))
		}
		close(stop)
		total := <-sent
		<-recvDone
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				t.Fatalf("packet %d arrived after %d", got[i], got[i-1])
			}
		}
		t.Logf("%d of %d packets arrived, in order", len(got), total)
		aa.verdict(t)
		ab.verdict(t)
		for _, n := range []*node{a, b} {
			st := n.dev.Status()
			for _, c := range []string{"rx_drop_source_not_allowed", "tx_drop_seal_failed", "rx_drop_decrypt_failed"} {
				if v := counter(st, c); v != 0 {
					t.Errorf("%s = %d, want 0", c, v)
				}
			}
		}
	})
}

// An initiator whose initiation is answered with a cookie reply (the
// responder is under load) retries at once with MAC2, once per attempt,
// instead of waiting out Rekey-Timeout (issue 13: fresh handshakes took 5
// to 10 s during a flood). Fake clock: the handshake completes at once.
func TestCookieReplyIsAnsweredAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := memPair(t, membind.NetOptions{})
		b.dev.flood.anonTime = nil // Options.anonymousHandshakeTime < 0: the cookie path
		start := time.Now()
		b.dev.flood.load.Observe(1, 1, start) // b is under load for LoadHold
		a.tun.(*memtun.Device).Inject(udpPacket(addrA, addrB, 1, 100))
		next(t, b.tun, 10*time.Second)
		took := time.Since(start)
		if c := counter(b.dev.Status(), "cookie_replies_sent"); c != 1 {
			t.Fatalf("b sent %d cookie replies, want 1 (it was under load)", c)
		}
		if c := counter(a.dev.Status(), "handshake_initiations_sent"); c != 2 {
			t.Fatalf("a sent %d initiations, want 2 (the first, and its retry with MAC2)", c)
		}
		if took >= noise.RekeyTimeout {
			t.Fatalf("the handshake took %v of fake time: the initiator waited for Rekey-Timeout", took)
		}
	})
}
