package exit

import (
	"net/netip"
	"sync"
	"time"
)

// Reason is why a flow was refused; reasonOK means it was not.
type Reason int

const (
	reasonOK              Reason = iota
	ReasonDenied                 // destination in --exit-deny
	ReasonNotAllowed             // destination outside --exit-allow
	ReasonLoopback               // the host's loopback, not allowed by name
	ReasonLinkLocal              // link-local (cloud metadata included), not allowed by name
	ReasonSelf                   // one of the exit's own listening sockets, or its tunnel address
	ReasonInvalid                // unspecified, multicast or broadcast destination
	ReasonUnknownPeer            // source address in no peer's AllowedIPs
	ReasonPeerCap                // the peer has MaxFlowsPerPeer flows open
	ReasonTotalCap               // MaxFlows flows open
	ReasonConnRefused            // the host's connect was refused
	ReasonConnTimeout            // the host's connect timed out
	ReasonUnreachable            // the host has no route to the destination
	ReasonConnError              // any other connect or socket error
	ReasonPingUnavailable        // no unprivileged ICMP sockets on this host
	ReasonClosing                // the exit is shutting down
	numReasons
)

var reasonNames = [numReasons]string{
	reasonOK: "ok", ReasonDenied: "denied", ReasonNotAllowed: "not_allowed",
	ReasonLoopback: "loopback", ReasonLinkLocal: "link_local", ReasonSelf: "self",
	ReasonInvalid: "invalid", ReasonUnknownPeer: "unknown_peer",
	ReasonPeerCap: "peer_flow_cap", ReasonTotalCap: "flow_cap",
	ReasonConnRefused: "connect_refused", ReasonConnTimeout: "connect_timeout",
	ReasonUnreachable: "unreachable", ReasonConnError: "connect_error",
	ReasonPingUnavailable: "ping_unavailable", ReasonClosing: "closing",
}

func (r Reason) String() string {
	if r < 0 || r >= numReasons {
		return "unknown"
	}
	return reasonNames[r]
}

var broadcast4 = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// protected ranges are refused unless an allow entry names them (lies
// inside them): 0.0.0.0/0 in --exit-allow does not open the host's
// loopback, 127.0.0.1/32 does.
var protected = []struct {
	p netip.Prefix
	r Reason
}{
	{netip.MustParsePrefix("127.0.0.0/8"), ReasonLoopback},
	{netip.MustParsePrefix("::1/128"), ReasonLoopback},
	{netip.MustParsePrefix("169.254.0.0/16"), ReasonLinkLocal},
	{netip.MustParsePrefix("fe80::/10"), ReasonLinkLocal},
}

// Policy decides which destinations the exit relays to. It is immutable
// after NewPolicy.
type Policy struct {
	allow, deny []netip.Prefix // allow nil: everything
	self        map[uint16]bool
	hostAddrs   map[netip.Addr]bool
	tunnel      map[netip.Addr]bool
}

// PolicyOptions configure a Policy.
type PolicyOptions struct {
	Allow, Deny []netip.Prefix
	// SelfPorts are the exit's own listening ports (its WireGuard port,
	// its metrics port): refused at any of HostAddrs, loopback or an
	// unspecified address.
	SelfPorts []uint16
	HostAddrs []netip.Addr
	// Tunnel are the exit's own tunnel addresses: refused except for the
	// services the exit answers there itself (DNS).
	Tunnel []netip.Addr
}

// NewPolicy builds a policy.
func NewPolicy(o PolicyOptions) *Policy {
	p := &Policy{self: map[uint16]bool{}, hostAddrs: map[netip.Addr]bool{}, tunnel: map[netip.Addr]bool{}}
	for _, a := range o.Allow {
		p.allow = append(p.allow, a.Masked())
	}
	for _, d := range o.Deny {
		p.deny = append(p.deny, d.Masked())
	}
	for _, port := range o.SelfPorts {
		p.self[port] = true
	}
	for _, a := range o.HostAddrs {
		p.hostAddrs[a.Unmap()] = true
	}
	for _, a := range o.Tunnel {
		p.tunnel[a.Unmap()] = true
	}
	return p
}

// Check says whether a flow to dst may be relayed, and if not why.
func (p *Policy) Check(dst netip.AddrPort) Reason {
	if dst.Port() == 0 {
		return ReasonInvalid
	}
	return p.check(dst.Addr(), dst.Port())
}

// CheckPing says whether echo requests to a may be relayed.
func (p *Policy) CheckPing(a netip.Addr) Reason { return p.check(a, 0) }

// check is Check for port, or for ICMP when port is 0.
func (p *Policy) check(a netip.Addr, port uint16) Reason {
	a = a.Unmap()
	switch {
	case !a.IsValid() || a.IsUnspecified() || a.IsMulticast() || a == broadcast4:
		return ReasonInvalid
	case p.tunnel[a]:
		return ReasonSelf
	}
	for _, d := range p.deny {
		if d.Contains(a) {
			return ReasonDenied
		}
	}
	if p.allow != nil && !containsAny(p.allow, a) {
		return ReasonNotAllowed
	}
	if port != 0 && p.self[port] && (p.hostAddrs[a] || a.IsLoopback()) && !p.named(a, a.BitLen()) {
		return ReasonSelf
	}
	for _, pr := range protected {
		if pr.p.Contains(a) && !p.named(a, pr.p.Bits()) {
			return pr.r
		}
	}
	return reasonOK
}

// named reports whether an allow entry of at least bits bits holds a.
func (p *Policy) named(a netip.Addr, bits int) bool {
	for _, al := range p.allow {
		if al.Bits() >= bits && al.Contains(a) {
			return true
		}
	}
	return false
}

func containsAny(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// flowCaps counts open flows per peer and in total.
type flowCaps struct {
	perPeer, total int
	mu             sync.Mutex
	open           int            // guarded by mu
	byPeer         map[string]int // guarded by mu
}

func newFlowCaps(perPeer, total int) *flowCaps {
	return &flowCaps{perPeer: perPeer, total: total, byPeer: map[string]int{}}
}

// acquire takes a flow slot for peer or says why there is none.
func (c *flowCaps) acquire(peer string) Reason {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open >= c.total {
		return ReasonTotalCap
	}
	if c.byPeer[peer] >= c.perPeer {
		return ReasonPeerCap
	}
	c.open++
	c.byPeer[peer]++
	return reasonOK
}

func (c *flowCaps) release(peer string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open--
	if c.byPeer[peer]--; c.byPeer[peer] <= 0 {
		delete(c.byPeer, peer)
	}
}

// logLimit lets one log line per reason through per interval; the rest
// are only counted.
type logLimit struct {
	every time.Duration
	mu    sync.Mutex
	last  [numReasons]time.Time // guarded by mu
}

func (l *logLimit) allow(r Reason, now time.Time) bool {
	if r < 0 || r >= numReasons {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last[r].IsZero() && now.Sub(l.last[r]) < l.every {
		return false
	}
	l.last[r] = now
	return true
}
