package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// randomLoss drops 1% of what the router forwards, both directions, at
// random: the kernel here has no netem, iptables' statistic match does.
var randomLoss = []string{"FORWARD", "-m", "statistic", "--mode", "random", "--probability", "0.01", "-j", "DROP"}

// TestStreamUnderLoss: with every UDP datagram and 1% of everything else
// dropped by the router, a peer on the stream transport carries TCP both
// ways intact. The outer TCP repairs the loss, so every frame arrives
// whole and in order: neither end counts a broken stream, a failed
// decryption or a replay. (What the loss costs in throughput is measured
// by scripts/bench-stream.sh, not asserted here.)
func TestStreamUnderLoss(t *testing.T) {
	p := streamPair(t)
	p.router.Run(append([]string{"iptables", "-A"}, randomLoss...)...)
	p.a.ns.waitPing(p.b.tun4, 15*time.Second)
	tcpTransfer(t, p.a.ns, p.b.ns, svc(p.b.tun4, 5031), helperSpec{Bytes: 16 << 20, Seed: 51})
	tcpTransfer(t, p.b.ns, p.a.ns, svc(p.a.tun4, 5032), helperSpec{Bytes: 16 << 20, Seed: 52})
	if n := lossDrops(t, p.router); n == 0 {
		t.Fatal("the router dropped nothing: the path was not lossy")
	} else {
		t.Logf("the router dropped %d packets at random", n)
	}
	for _, n := range []*node{p.a, p.b} {
		c := n.counters()
		for _, k := range []string{"stream_bad_frames", "decrypt_failed", "replayed"} {
			if c[k] != 0 {
				t.Errorf("%s: %s = %d over a stream on a lossy path", n.iface, k, c[k])
			}
		}
		if c["stream_rx_frames"] == 0 {
			t.Errorf("%s: no frame received over the stream", n.iface)
		}
	}
}

// lossDrops is how many packets the random-loss rule has dropped.
func lossDrops(t testing.TB, r *netns) int {
	t.Helper()
	out := r.Run("iptables", "-L", "FORWARD", "-v", "-n", "-x")
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[2] == "DROP" && strings.Contains(line, "statistic") {
			n, err := strconv.Atoi(f[0])
			if err != nil {
				t.Fatalf("iptables counters: %q", line)
			}
			return n
		}
	}
	t.Fatalf("no random-loss rule in\n%s", out)
	return 0
}
