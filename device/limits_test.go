package device_test

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"

	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/tun/memtun"
)

func newLimitedDevice(tb testing.TB, peers, allowedIPs int) *device.Device {
	tb.Helper()
	var opts device.Options
	device.SetLimits(&opts, peers, allowedIPs)
	netw := membind.NewNetwork(membind.NetOptions{})
	d, err := device.New(memtun.New("u", 1420, 16), netw.NewBind(netip.MustParseAddr("192.0.2.1")), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}

func limitKey(i int) [32]byte {
	var k [32]byte
	k[0], k[1], k[31] = byte(i), byte(i>>8), 0x77
	return k
}

func peersCfg(from, to int, aips ...string) *device.Config {
	cfg := &device.Config{}
	for i := from; i < to; i++ {
		pc := device.PeerConfig{PublicKey: limitKey(i)}
		for _, a := range aips {
			pc.AllowedIPs = append(pc.AllowedIPs, device.AllowedIPChange{Prefix: netip.MustParsePrefix(a)})
		}
		cfg.Peers = append(cfg.Peers, pc)
	}
	return cfg
}

// TestApplyRefusesPastPeerCap: the number of peers is capped, so a client
// of the UAPI socket cannot grow the daemon without bound one request at a
// time. A request that would end past the cap is refused whole; one that
// removes as many as it adds, or replaces them all, is not.
func TestApplyRefusesPastPeerCap(t *testing.T) {
	d := newLimitedDevice(t, 3, 0)
	if err := d.Apply(peersCfg(0, 3)); err != nil {
		t.Fatalf("3 peers under a cap of 3: %v", err)
	}
	before := d.Status()
	err := d.Apply(peersCfg(3, 4))
	if !errors.Is(err, device.ErrTooMany) {
		t.Fatalf("a 4th peer: %v, want ErrTooMany", err)
	}
	if !reflect.DeepEqual(d.Status().Peers, before.Peers) {
		t.Fatal("a refused request changed the peers")
	}
	swap := peersCfg(3, 4)
	swap.Peers = append(swap.Peers, device.PeerConfig{PublicKey: limitKey(0), Remove: true})
	if err := d.Apply(swap); err != nil {
		t.Fatalf("removing one and adding one: %v", err)
	}
	repl := peersCfg(10, 13)
	repl.ReplacePeers = true
	if err := d.Apply(repl); err != nil {
		t.Fatalf("replacing all 3 with 3 others: %v", err)
	}
	upd := peersCfg(20, 30)
	for i := range upd.Peers {
		upd.Peers[i].UpdateOnly = true // unknown peers are not created
	}
	if err := d.Apply(upd); err != nil {
		t.Fatalf("update_only for unknown peers: %v", err)
	}
	if n := len(d.Status().Peers); n != 3 {
		t.Fatalf("%d peers, want 3", n)
	}
}

// TestApplyRefusesPastAllowedIPCap: the same for allowed IPs across all
// peers; replacing a peer's allowed IPs frees what it held.
func TestApplyRefusesPastAllowedIPCap(t *testing.T) {
	d := newLimitedDevice(t, 0, 4)
	first := peersCfg(0, 1, "10.0.0.0/24", "fd00::/64")
	first.Peers = append(first.Peers, peersCfg(1, 2, "10.3.0.0/24", "fd03::/64").Peers...)
	if err := d.Apply(first); err != nil {
		t.Fatalf("4 allowed IPs under a cap of 4: %v", err)
	}
	before := d.Status()
	err := d.Apply(peersCfg(2, 3, "10.9.0.0/24"))
	if !errors.Is(err, device.ErrTooMany) {
		t.Fatalf("a 5th allowed IP: %v, want ErrTooMany", err)
	}
	if !reflect.DeepEqual(d.Status().Peers, before.Peers) {
		t.Fatal("a refused request changed the peers")
	}
	re := peersCfg(0, 1, "10.1.0.0/24", "10.2.0.0/24")
	re.Peers[0].ReplaceAllowedIPs = true
	if err := d.Apply(re); err != nil {
		t.Fatalf("replacing one peer's 2 allowed IPs with 2 others: %v", err)
	}
	gone := &device.Config{Peers: []device.PeerConfig{{PublicKey: limitKey(1), Remove: true}}}
	gone.Peers = append(gone.Peers, peersCfg(5, 6, "10.5.0.0/24", "10.6.0.0/24").Peers...)
	if err := d.Apply(gone); err != nil {
		t.Fatalf("removing a peer with 2 and adding one with 2: %v", err)
	}
}
