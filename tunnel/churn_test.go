package tunnel_test

import (
	"context"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/fips-go/fips-go/tunnel"
)

// Dialled connections, once closed, leave nothing behind: 10,000 of them,
// each dialled by name (so with its DNS lookup), in five rounds. After
// each round, once TIME-WAIT has drained (the stacks count no connection),
// the goroutine count is back where it started and the heap is no larger
// than after the first round, give or take heapSlack: it grows once (the
// stack's tables and pools reach their working size) and then stays.
// A closed connection that was kept would hold at least 6.5 KiB (what one
// costs in TIME-WAIT); the slack allows 512 bytes per connection of the
// last 8,000, because pools and the collector's pacing move the live heap
// by a megabyte from round to round (CI saw +1.13 MiB with nothing held).
func TestDialsDoNotAccumulate(t *testing.T) {
	const heapSlack = 4 << 20
	rounds, perRound := 5, 2000
	if testing.Short() {
		rounds, perRound = 3, 300
	}
	server, client := pair(t, false)
	ln, err := server.Listen("tcp", ":9000")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go echoTCP(ln)
	ctx := context.Background()
	dial := func() {
		c, err := client.DialContext(ctx, "tcp", "web.test:9000")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	for range 10 {
		dial()
	}
	drained(t, server, client)
	before := settledGoroutines(0)
	heap0 := heapInUse()
	var first uint64
	for round := range rounds {
		for range perRound {
			dial()
		}
		drained(t, server, client)
		heap := heapInUse()
		t.Logf("round %d: %d connections dialled and closed; heap %d KiB (before any: %d KiB)",
			round+1, (round+1)*perRound, heap>>10, heap0>>10)
		if round == 0 {
			first = heap
		} else if heap > first+heapSlack {
			t.Fatalf("heap grew from %d KiB after round 1 to %d KiB after round %d", first>>10, heap>>10, round+1)
		}
	}
	if after := settledGoroutines(before); after > before {
		t.Fatalf("goroutines grew from %d to %d over %d closed connections", before, after, rounds*perRound)
	}
}

// drained waits until neither tunnel's stack holds a TCP connection, none
// in TIME-WAIT either (netstack.DefaultTCPTimeWait, 5 s).
func drained(t *testing.T, tunnels ...*tunnel.Tunnel) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, tn := range tunnels {
		for tunnel.StackStats(tn).TCPConnections > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d TCP connections still held after 30 s", tunnel.StackStats(tn).TCPConnections)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// heapInUse is the heap's live bytes after a full collection.
func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// settledGoroutines waits up to 10 s for the goroutine count to fall to
// want (0: to stop changing) and returns it.
func settledGoroutines(want int) int {
	last := runtime.NumGoroutine()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		n := runtime.NumGoroutine()
		if (want > 0 && n <= want) || (want == 0 && n == last) {
			return n
		}
		last = n
	}
	return last
}
