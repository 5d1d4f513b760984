package device

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/tun/memtun"
)

// With loss, duplication and reordering on the wire, every packet that
// arrives arrives once, and the duplicates are counted as replays.
func TestLossyNetworkDeliversAtMostOnce(t *testing.T) {
	a, b := memPair(t, membind.NetOptions{Loss: 0.05, Duplicate: 0.05, Reorder: 0.10, Seed: 7, QueueLen: 16384})
	ta, tb := a.tun.(*memtun.Device), b.tun.(*memtun.Device)

	// Get a session up; initiations may be lost too, so keep poking.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ta.Inject(udpPacket(addrA, addrB, 0, 8))
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := tb.Next(ctx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no session within 30s at 5% loss")
		}
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := tb.Next(ctx)
		cancel()
		if err != nil {
			break
		}
	}

	const n = 3000
	for i := 1; i <= n; i++ {
		if err := ta.InjectContext(context.Background(), udpPacket(addrA, addrB, uint32(i), 200)); err != nil {
			t.Fatal(err)
		}
	}
	seen := make(map[uint32]bool)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		pkt, err := tb.Next(ctx)
		cancel()
		if err != nil {
			break
		}
		seq := binary.BigEndian.Uint32(pkt[28:])
		if seq == 0 {
			continue // late copies of the warm-up packet
		}
		if seen[seq] {
			t.Fatalf("packet %d delivered twice", seq)
		}
		seen[seq] = true
	}
	if len(seen) < n*85/100 {
		t.Fatalf("only %d of %d packets arrived at 5%% loss\na: %v\nb: %v", len(seen), n, a.dev.Status().Counters, b.dev.Status().Counters)
	}
	st := b.dev.Status()
	if counter(st, "rx_drop_replayed") == 0 {
		t.Fatal("the network duplicated datagrams but none was refused as a replay")
	}
	t.Logf("%d/%d delivered once each; %d replays refused", len(seen), n, counter(st, "rx_drop_replayed"))
}
