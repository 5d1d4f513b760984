package tunnel

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
)

const (
	// nudgeEvery is how often WaitHandshake sends another datagram to a
	// peer still without a handshake: the protocol's REKEY_TIMEOUT, after
	// which the device would have retried by itself anyway.
	nudgeEvery = 5 * time.Second
	// discardPort is where the datagrams that start a handshake go (RFC
	// 863's discard service).
	discardPort = 9
)

// WaitHandshake returns once the tunnel's peers have completed a
// handshake, or with ctx's error. A client waits for each peer that has an
// endpoint; a tunnel whose peers have none yet (a server) waits for the
// first peer to complete one. A handshake starts only when there is
// something to send, so WaitHandshake sends an empty UDP datagram into the
// tunnel, to the discard port of an address each waited-for peer routes,
// every five seconds until it completes. It wakes on the device's
// handshake events, not by polling. On a closed tunnel, or when Close
// ends the wait, it fails with an error matching net.ErrClosed.
func (t *Tunnel) WaitHandshake(ctx context.Context) error {
	if err := t.stopped(); err != nil {
		return fmt.Errorf("tunnel: wait for handshake: %w", err)
	}
	nudged := map[noise.PublicKey]time.Time{}
	timer := time.NewTimer(nudgeEvery)
	defer timer.Stop()
	for {
		// Taken before the look at the device, so that a handshake
		// completing in between still wakes the wait below.
		completed := t.events.handshakeDone()
		st := t.dev.Stats(math.MaxInt)
		if st.Peers == 0 {
			return ErrNoPeers
		}
		waiting, done := pending(st.PeerStats)
		if done {
			return nil
		}
		now := time.Now()
		due := map[noise.PublicKey]bool{}
		wake := nudgeEvery
		for _, k := range waiting {
			if now.Sub(nudged[k]) >= nudgeEvery {
				nudged[k] = now
				due[k] = true
			}
			wake = min(wake, nudged[k].Add(nudgeEvery).Sub(now))
		}
		if len(due) > 0 {
			t.nudge(due)
		}
		timer.Reset(wake)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.dev.Done():
			return fmt.Errorf("tunnel: wait for handshake: %w", t.stopped())
		case <-completed:
		case <-timer.C:
		}
	}
}

// pending is the peers with an endpoint and no handshake yet, and whether
// the wait is over: every peer with an endpoint has had a handshake, or,
// when none has an endpoint, any peer has.
func pending(peers []device.PeerStats) (waiting []noise.PublicKey, done bool) {
	withEndpoint, anyHS := 0, false
	for _, p := range peers {
		hs := !p.LastHandshake.IsZero()
		anyHS = anyHS || hs
		if p.Endpoint.IsValid() {
			withEndpoint++
			if !hs {
				waiting = append(waiting, p.PublicKey)
			}
		}
	}
	if withEndpoint == 0 {
		return nil, anyHS
	}
	return waiting, len(waiting) == 0
}

// nudge sends an empty datagram towards each peer in due, so that the
// device starts a handshake with it.
func (t *Tunnel) nudge(due map[noise.PublicKey]bool) {
	for _, p := range t.dev.Status().Peers {
		if !due[p.PublicKey] {
			continue
		}
		dst, ok := t.routedBy(p.AllowedIPs)
		if !ok {
			continue
		}
		c, err := t.net.DialUDPAddrPort(netip.AddrPort{}, netip.AddrPortFrom(dst, discardPort))
		if err != nil {
			continue
		}
		c.Write(nil)
		c.Close()
	}
}

// routedBy picks an address in prefixes, of one of the tunnel's families
// and not its own: the first one past the network address, which a /0 or
// a subnet would otherwise offer as unspecified or as the network itself.
func (t *Tunnel) routedBy(prefixes []netip.Prefix) (netip.Addr, bool) {
	for _, p := range prefixes {
		a := p.Masked().Addr()
		if p.Bits() < a.BitLen() {
			a = a.Next()
		}
		if !a.IsValid() || !p.Contains(a) || !t.hasFamily(a) || t.isOwn(a) {
			continue
		}
		return a, true
	}
	return netip.Addr{}, false
}

func (t *Tunnel) isOwn(a netip.Addr) bool {
	for _, own := range t.addrs {
		if own == a {
			return true
		}
	}
	return false
}
