package dnsfollow

import (
	"net/netip"
	"testing"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
)

func TestTable(t *testing.T) {
	tb := NewTable()
	k3 := noise.PublicKey{3}
	if err := tb.Set(map[noise.PublicKey]string{k1: "a.example:1", k2: "b.example:2", k3: "c.example:3"}, true); err != nil {
		t.Fatal(err)
	}
	snap := tb.Snapshot()
	// An explicit endpoint or a removal forgets the name; other changes
	// (allowed IPs) keep it.
	ep := netip.MustParseAddrPort("192.0.2.1:1")
	tb.Applied(&device.Config{Peers: []device.PeerConfig{{PublicKey: k1, Endpoint: &ep}, {PublicKey: k2, Remove: true}, {PublicKey: k3}}})
	if got := tb.Snapshot(); len(got) != 1 || got[k3] != "c.example:3" {
		t.Fatalf("after Applied: %v", got)
	}
	if len(snap) != 3 {
		t.Fatalf("an earlier snapshot changed: %v", snap)
	}
	tb.Set(map[noise.PublicKey]string{k3: "", k1: "d.example:4"}, false)
	if got := tb.Snapshot(); len(got) != 1 || got[k1] != "d.example:4" {
		t.Fatalf("merge: %v", got)
	}
	tb.Applied(&device.Config{ReplacePeers: true})
	if len(tb.Snapshot()) != 0 {
		t.Fatal("replace_peers kept names")
	}
	big := map[noise.PublicKey]string{}
	for i := range MaxNames + 1 {
		big[noise.PublicKey{byte(i), byte(i >> 8), byte(i >> 16)}] = "x.example:1"
	}
	if err := tb.Set(big, true); err != ErrTooManyNames || len(tb.Snapshot()) != 0 {
		t.Fatalf("over the cap: %v, %d names", err, len(tb.Snapshot()))
	}
}
