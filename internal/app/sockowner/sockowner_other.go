//go:build !linux

package sockowner

import "net/netip"

// Owner fails with ErrUnsupported: only Linux tells socket owners here.
func Owner(p Proto, self, peer netip.AddrPort) (uint32, error) {
	return 0, ErrUnsupported
}
