package tunnel

import (
	"net/netip"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
)

// WhoIs is the peer that a packet from a comes from, by cryptokey
// routing: the peer whose allowed IPs hold a with the longest prefix, the
// only one whose packets from a the device accepts. A server authorises a
// connection by its remote address's peer (for a net.Conn of the tunnel,
// c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr()). The status carries
// the peer's public key, allowed IPs, endpoint and last handshake; its
// PresharedKey is left zero. ok is false when no peer routes a.
func (t *Tunnel) WhoIs(a netip.Addr) (p device.PeerStatus, ok bool) {
	k, ok := t.dev.PeerFor(a)
	if !ok {
		return device.PeerStatus{}, false
	}
	// The peer may go between the two calls; then a has no peer now.
	p, ok = t.dev.Peer(k)
	p.PresharedKey = noise.PresharedKey{}
	return p, ok
}
