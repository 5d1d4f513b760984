package device

import (
	"net/netip"
	"time"

	"github.com/fips-go/fips-go/device/noise"
)

// PeerEventKind says what happened to a peer.
type PeerEventKind uint8

const (
	// HandshakeCompleted: a session with the peer is up, as initiator
	// (the response arrived) or responder (the first packet under the
	// new keys arrived); a rekey completes one too.
	HandshakeCompleted PeerEventKind = iota + 1
	// SessionExpired: the peer's keys were zeroed, three times
	// RejectAfterTime after the last session was made; the next packet
	// to it starts a new handshake.
	SessionExpired
	// EndpointChanged: the peer's endpoint is a new address, set by
	// configuration or learnt from an authenticated packet (roaming).
	EndpointChanged
)

func (k PeerEventKind) String() string {
	switch k {
	case HandshakeCompleted:
		return "handshake completed"
	case SessionExpired:
		return "session expired"
	case EndpointChanged:
		return "endpoint changed"
	}
	return "unknown event"
}

// PeerEvent is what Options.OnPeerEvent receives.
type PeerEvent struct {
	Kind     PeerEventKind
	Peer     noise.PublicKey
	Endpoint netip.AddrPort // the peer's endpoint then (invalid when none)
	At       time.Time      // on the device's clock
}

// emit reports an event to Options.OnPeerEvent. It is called with none of
// the peer's locks held but on device goroutines (handshake workers,
// receivers, the timer wheel), which is why OnPeerEvent must not block.
func (p *Peer) emit(kind PeerEventKind, now time.Time) {
	if p.d == nil || p.d.opts.OnPeerEvent == nil {
		return
	}
	p.epMu.RLock()
	ep := p.ep.Dst
	p.epMu.RUnlock()
	p.d.opts.OnPeerEvent(PeerEvent{Kind: kind, Peer: p.pub, Endpoint: ep, At: now})
}
