package device

import (
	"net/netip"
	"sync"

	"github.com/fips-go/fips-go/conn"
)

// knownEndpoints counts the configured peers' current endpoints. Triage
// gives an initiation from one of them a priority slot even without MAC2,
// under a per-address limit, so a real peer earns its cookie while a flood
// fills the anonymous queue. A connected socket (connsock.go) keeps the
// flood off the peer's socket queue; this keeps it off the peer's place in
// the handshake queues, with or without one. Its mutex is a leaf, taken
// under Peer.epMu.
type knownEndpoints struct {
	mu sync.RWMutex // guards m
	m  map[netip.AddrPort]int
}

func (k *knownEndpoints) has(a netip.AddrPort) bool {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.m[a] > 0
}

// move forgets old (when hadOld) and learns new (when hasNew).
func (k *knownEndpoints) move(old netip.AddrPort, hadOld bool, new netip.AddrPort, hasNew bool) {
	if hadOld && hasNew && old == new {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if hadOld {
		if k.m[old] <= 1 {
			delete(k.m, old)
		} else {
			k.m[old]--
		}
	}
	if hasNew {
		if k.m == nil {
			k.m = make(map[netip.AddrPort]int)
		}
		k.m[new]++
	}
}

// setEndpoint records where the peer is now, and tells the device's
// known endpoints unless the peer is already removed.
func (p *Peer) setEndpoint(ep conn.Endpoint) {
	if p.moveEndpoint(ep) && p.d != nil {
		p.emit(EndpointChanged, p.d.now())
	}
}

// moveEndpoint is setEndpoint under epMu; it reports whether the address
// changed to a valid one.
func (p *Peer) moveEndpoint(ep conn.Endpoint) (changed bool) {
	p.epMu.Lock()
	defer p.epMu.Unlock()
	oldEp, had := p.ep, p.epKnown
	if p.hasEp && p.ep.Dst != ep.Dst {
		p.epChanges.Add(1)
	}
	changed = ep.Dst.IsValid() && (!p.hasEp || p.ep.Dst != ep.Dst)
	p.ep, p.hasEp = ep, true
	p.epKnown = p.d != nil && !p.removed.Load() && ep.Dst.IsValid()
	if p.d != nil {
		p.d.known.move(oldEp.Dst, had, ep.Dst, p.epKnown)
		p.d.socks.move(p.d, oldEp, had, ep, p.epKnown)
	}
	return changed
}

// forgetEndpoint takes a removed peer's endpoint out of the known ones;
// p.removed is set first, so a concurrent setEndpoint cannot put it back.
func (p *Peer) forgetEndpoint() {
	p.epMu.Lock()
	defer p.epMu.Unlock()
	if p.epKnown {
		p.d.known.move(p.ep.Dst, true, netip.AddrPort{}, false)
		p.d.socks.move(p.d, p.ep, true, conn.Endpoint{}, false)
		p.epKnown = false
	}
}
