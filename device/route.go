package device

import "github.com/fips-go/fips-go/device/noise"

// Peer is the status of the peer with public key k, as Status would
// report it, without the cost of a snapshot of every peer. ok is false
// when the device has no such peer.
func (d *Device) Peer(k noise.PublicKey) (ps PeerStatus, ok bool) {
	d.peersMu.RLock()
	p := d.peers[k]
	d.peersMu.RUnlock()
	if p == nil {
		return PeerStatus{}, false
	}
	// As in Status: the allowed IPs under aipMu alone, then the peer's lock.
	d.aipMu.RLock()
	aips := d.aip.Prefixes(p)
	d.aipMu.RUnlock()
	return p.status(aips), true
}
