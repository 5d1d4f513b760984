package device

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/internal/packet"
	"github.com/fips-go/fips-go/tun/memtun"
)

// TestPMTUPaddedDatagramFits: WireGuard pads each packet to a multiple of
// 16 bytes before sealing it, so what a 1280-byte IPv4 path leaves inside
// the tunnel is 1216 bytes, not 1280-60 = 1220: a 1220-byte packet would
// leave as a 1292-byte datagram, fragmented on the way. Every inner size
// from 1200 to 1240 is either sent in a datagram that fits the path or
// answered with fragmentation-needed, never both nor neither.
func TestPMTUPaddedDatagramFits(t *testing.T) {
	const path, outerHdr = 1280, packet.IPv4HeaderLen + 8
	var mu sync.Mutex
	var from netip.AddrPort
	biggest := 0
	a, b := memPair(t, membind.NetOptions{Tap: func(src, _ netip.AddrPort, data []byte) {
		mu.Lock()
		defer mu.Unlock()
		if src == from {
			biggest = max(biggest, len(data))
		}
	}})
	mu.Lock()
	from = a.ep
	mu.Unlock()
	pinPMTU(t, a, b, path)
	for size := 1200; size <= 1240; size++ {
		mu.Lock()
		biggest = 0
		mu.Unlock()
		pkt := tcpPacket(t, addrA, addrB, packet.TCPAck, nil, size)
		// Counted before the packet goes in: the answer may come before
		// arrivedOrAnswered first looks.
		before := counter(a.dev.Status(), "tx_pmtu_icmp_sent")
		if err := a.tun.(*memtun.Device).Inject(pkt); err != nil {
			t.Fatal(err)
		}
		arrived, answered := arrivedOrAnswered(t, a, b, before)
		mu.Lock()
		sent := biggest
		mu.Unlock()
		switch {
		case arrived && sent+outerHdr > path:
			t.Fatalf("a %d-byte packet left in a %d-byte datagram: %d bytes on a %d-byte path",
				size, sent, sent+outerHdr, path)
		case !arrived && !answered:
			t.Fatalf("a %d-byte packet neither arrived nor was answered", size)
		}
	}
}

// arrivedOrAnswered waits until the packet just injected at a comes out
// of b's TUN or a counts a fragmentation-needed sent for it (more than
// before, the count before it was injected).
func arrivedOrAnswered(t *testing.T, a, b *node, before uint64) (arrived, answered bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err := b.tun.(*memtun.Device).Next(ctx)
		cancel()
		if err == nil {
			return true, false
		}
		if counter(a.dev.Status(), "tx_pmtu_icmp_sent") > before {
			if r := next(t, a.tun, 5*time.Second); !isFragNeeded(r) {
				t.Fatalf("a's TUN got %d bytes that are not a fragmentation-needed", len(r))
			}
			return false, true
		}
	}
	return false, false
}

func isFragNeeded(p []byte) bool {
	in, err := packet.Parse(p)
	return err == nil && in.Proto == packet.ProtoICMPv4 && in.ICMPType == 3 && in.ICMPCode == 4
}
