package device

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"testing"

	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/tun/memtun"
)

// A configured peer that never handshook costs the heap what its
// configuration needs and no more: a gateway holds 100,000 of them. The
// traffic state (sequencers, CoDel, flow counts) and the handshake's
// working state wait for the first packet and the first handshake; the
// goroutine count does not grow with the peers.
func TestConfiguredPeerHeap(t *testing.T) {
	n := 10000
	if raceEnabled || testing.Short() {
		n = 2000
	}
	netw := membind.NewNetwork(membind.NetOptions{QueueLen: 64})
	host := netip.MustParseAddr("192.0.2.1")
	nd := newNode(t, memtun.New("gw", 1420, 64), netw.NewBind(host), addrA, host,
		Options{Workers: 1, batchSize: 8, batches: 4, smallBatches: 4, handshakeQueue: 8, stagingBuffers: 4})
	peers := make([]PeerConfig, n)
	for i := range peers {
		var pub noise.PublicKey
		binary.LittleEndian.PutUint64(pub[:], uint64(i)+1) // distinct; never used in a DH
		a := [4]byte{10, 128 + byte(i>>16), byte(i >> 8), byte(i)}
		peers[i] = PeerConfig{PublicKey: pub,
			AllowedIPs: []AllowedIPChange{{Prefix: netip.PrefixFrom(netip.AddrFrom4(a), 32)}}}
	}
	base, g0 := heapAfterGC(), runtime.NumGoroutine()
	if err := nd.dev.Apply(&Config{Peers: peers}); err != nil {
		t.Fatal(err)
	}
	peers = nil
	per := (float64(heapAfterGC()) - float64(base)) / float64(n)
	t.Logf("%d configured peers: %.0f B of heap each", n, per)
	// 1.2 KiB: 2.3 KiB before the traffic and handshake state waited for
	// their first use; the daemon's RSS per peer is about 1.15 times its
	// heap (scripts/bench-peers.sh: 1.40 KiB at 100,000 peers).
	if per > 1200 {
		t.Errorf("a configured peer takes %.0f B of heap, want at most 1,200", per)
	}
	if g := runtime.NumGoroutine(); g > g0 {
		t.Errorf("%d goroutines after adding %d peers, %d before", g, n, g0)
	}
	nd.dev.peersMu.RLock()
	defer nd.dev.peersMu.RUnlock()
	for _, p := range nd.dev.peers {
		if p.live.Load() != nil {
			t.Fatal("a peer that carried nothing has traffic state")
		}
	}
}
