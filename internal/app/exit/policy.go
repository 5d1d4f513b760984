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
	ReasonHostAddr               // one of the host's own addresses, not allowed by name
	ReasonMetadata               // a cloud metadata service, not allowed by name
	ReasonPeerPending            // the peer has its share of SYNs waiting for the host's connect
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
	ReasonHostAddr: "host_address", ReasonMetadata: "metadata", ReasonPeerPending: "peer_pending_cap",
}

func (r Reason) String() string {
	if r < 0 || r >= numReasons {
		return "unknown"
	}
	return reasonNames[r]
}

var broadcast4 = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// thisNetwork is 0.0.0.0/8: Linux takes a connect to 0.0.0.0 as one to
// itself, and the rest of it is no destination.
var thisNetwork = netip.MustParsePrefix("0.0.0.0/8")

// protected ranges are refused unless an allow entry names them (lies
// inside them): 0.0.0.0/0 in --exit-allow does not open the host's
// loopback, 127.0.0.1/32 does.
var protected = []struct {
	p netip.Prefix
	r Reason
}{
	{netip.MustParsePrefix("127.0.0.0/8"), ReasonLoopback},
	{netip.MustParsePrefix("::1/128"), ReasonLoopback},
	{netip.MustParsePrefix("169.254.0.0/16"), ReasonLinkLocal}, // AWS, GCP, Azure, OpenStack metadata among them
	{netip.MustParsePrefix("fe80::/10"), ReasonLinkLocal},
	{netip.MustParsePrefix("fd00:ec2::254/128"), ReasonMetadata},  // AWS over IPv6
	{netip.MustParsePrefix("168.63.129.16/32"), ReasonMetadata},   // Azure's wire server
	{netip.MustParsePrefix("100.100.100.200/32"), ReasonMetadata}, // Alibaba Cloud
}

// NAT64 prefixes (RFC 6052's well-known one, RFC 8215's local-use one):
// an address in them stands for an IPv4 address, which the policy judges.
var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local     = netip.MustParsePrefix("64:ff9b:1::/48")
)

// unwrapNAT64 returns the IPv4 address a NAT64 address embeds, or a.
func unwrapNAT64(a netip.Addr) netip.Addr {
	b := a.As16()
	switch {
	case nat64WellKnown.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16]))
	case nat64Local.Contains(a):
		// A /48 prefix puts the address in bits 48-63 and 72-87, around
		// the reserved octet 8 (RFC 6052, section 2.2).
		return netip.AddrFrom4([4]byte{b[6], b[7], b[9], b[10]})
	}
	return a
}

// HostState is what the policy knows of the host when a flow opens; it
// changes (addresses come and go, the listen port is set over UAPI), so
// the exit reads it afresh, cached at most briefly.
type HostState struct {
	// Prefixes are the host's interface addresses with their prefix
	// lengths (an IPv4 prefix of /30 or shorter gives a broadcast
	// address).
	Prefixes []netip.Prefix
	// Ports are the exit's own listening ports now (its WireGuard port).
	Ports []uint16
}

// hasAddr reports whether a is one of the host's addresses.
func (h *HostState) hasAddr(a netip.Addr) bool {
	for _, p := range h.Prefixes {
		if p.Addr().Unmap() == a {
			return true
		}
	}
	return false
}

// isBroadcast reports whether a is the broadcast address of one of the
// host's IPv4 subnets.
func (h *HostState) isBroadcast(a netip.Addr) bool {
	if !a.Is4() {
		return false
	}
	for _, p := range h.Prefixes {
		if pa := p.Addr().Unmap(); pa.Is4() && p.Bits() <= 30 && p.Bits() >= 0 {
			if lastAddr(netip.PrefixFrom(pa, p.Bits())) == a {
				return true
			}
		}
	}
	return false
}

func (h *HostState) hasPort(port uint16) bool {
	for _, p := range h.Ports {
		if p == port {
			return true
		}
	}
	return false
}

// lastAddr is the highest IPv4 address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= uint32(1)<<(32-p.Bits()) - 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
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
	// SelfPorts are listening ports of the exit that do not change (its
	// metrics port): refused, as HostState.Ports are, at the host's
	// addresses, loopback or an unspecified address.
	SelfPorts []uint16
	// HostAddrs are addresses of the host besides HostState's.
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

// Check says whether a flow to dst may be relayed, and if not why; h is
// the host as it is now (nil: nothing known beyond PolicyOptions).
func (p *Policy) Check(dst netip.AddrPort, h *HostState) Reason {
	if dst.Port() == 0 {
		return ReasonInvalid
	}
	return p.check(dst.Addr(), dst.Port(), h)
}

// CheckPing says whether echo requests to a may be relayed.
func (p *Policy) CheckPing(a netip.Addr, h *HostState) Reason { return p.check(a, 0, h) }

// check is Check for port, or for ICMP when port is 0. A NAT64 address
// is judged as the IPv4 address it embeds; the allow and deny lists may
// name either form.
func (p *Policy) check(dst netip.Addr, port uint16, h *HostState) Reason {
	if h == nil {
		h = &HostState{}
	}
	orig := dst.Unmap()
	a := unwrapNAT64(orig)
	switch {
	case !a.IsValid() || a.IsUnspecified() || a.IsMulticast() || a == broadcast4 || thisNetwork.Contains(a) || h.isBroadcast(a):
		return ReasonInvalid
	case p.tunnel[a] || p.tunnel[orig]:
		return ReasonSelf
	}
	if containsAny(p.deny, a) || containsAny(p.deny, orig) {
		return ReasonDenied
	}
	if p.allow != nil && !containsAny(p.allow, a) && !containsAny(p.allow, orig) {
		return ReasonNotAllowed
	}
	host := p.hostAddrs[a] || h.hasAddr(a)
	if port != 0 && (p.self[port] || h.hasPort(port)) && (host || a.IsLoopback()) && !p.named(a, a.BitLen()) {
		return ReasonSelf
	}
	for _, pr := range protected {
		if pr.p.Contains(a) && !p.named(a, pr.p.Bits()) {
			return pr.r
		}
	}
	if host && !p.named(a, a.BitLen()) {
		return ReasonHostAddr
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
