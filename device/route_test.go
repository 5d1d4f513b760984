package device

import (
	"net/netip"
	"testing"

	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/tun/memtun"
)

// Peer reports one peer as Status does, and nothing for a key the device
// does not have.
func TestPeer(t *testing.T) {
	netw := membind.NewNetwork(membind.NetOptions{})
	host := netip.MustParseAddr("192.0.2.1")
	n := newNode(t, memtun.New("a", 1420, 64), netw.NewBind(host), addrA, host, Options{})
	var k, other noise.PublicKey
	k[0], other[0] = 1, 2
	ep := netip.MustParseAddrPort("192.0.2.9:51820")
	if err := n.dev.Apply(&Config{Peers: []PeerConfig{
		{PublicKey: k, Endpoint: &ep, AllowedIPs: []AllowedIPChange{{Prefix: netip.MustParsePrefix("10.0.0.0/24")}}},
		{PublicKey: other, AllowedIPs: []AllowedIPChange{{Prefix: netip.MustParsePrefix("10.0.1.0/24")}}},
	}}); err != nil {
		t.Fatal(err)
	}
	got, ok := n.dev.Peer(k)
	if !ok || got.PublicKey != k || got.Endpoint != ep || len(got.AllowedIPs) != 1 || got.AllowedIPs[0].String() != "10.0.0.0/24" {
		t.Fatalf("Peer = %+v, %v", got, ok)
	}
	for _, p := range n.dev.Status().Peers {
		if p.PublicKey == k && (p.Endpoint != got.Endpoint || len(p.AllowedIPs) != len(got.AllowedIPs)) {
			t.Errorf("Status says %+v, Peer %+v", p, got)
		}
	}
	if _, ok := n.dev.Peer(noise.PublicKey{9}); ok {
		t.Error("Peer found a key the device does not have")
	}
}
