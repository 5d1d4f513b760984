package fairness

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fips-go/fips-go/tun/memtun"
)

const heavyFactor = 10 // the heavy peer offers this many times a light one's load

// runLength is how long each scenario runs: 2 s as a test, 10 s with
// FIPS_FAIRNESS=1, or FIPS_FAIRNESS_DURATION.
func runLength(t *testing.T) time.Duration {
	if v := os.Getenv("FIPS_FAIRNESS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("FIPS_FAIRNESS_DURATION=%q: want a positive Go duration", v)
		}
		return d
	}
	if os.Getenv("FIPS_FAIRNESS") == "1" {
		return 10 * time.Second
	}
	return 2 * time.Second
}

// direction is one way through the gateway: where a sender's packets go
// in and whose counters see them come out.
type direction struct {
	name   string
	inject func(i int) *memtun.Device // the TUN that takes sender i's packets
	pkt    func(i int) []byte
	counts *[spokes]atomic.Uint64
	sent   func() []uint64 // bytes sent through the tunnel by sender
	in     bool
}

func directions(tb *testbed) (out, in direction) {
	out = direction{
		name:   "out",
		inject: func(int) *memtun.Device { return tb.gwTun },
		pkt:    func(i int) []byte { return packet(gatewayAddr, spokeAddr(i)) },
		counts: &tb.out,
		sent:   tb.gatewaySent,
	}
	in = direction{
		name:   "in",
		inject: func(i int) *memtun.Device { return tb.spokes[i].tun },
		pkt:    func(i int) []byte { return packet(spokeAddr(i), gatewayAddr) },
		counts: &tb.in,
		sent:   tb.spokesSent,
		in:     true,
	}
	return out, in
}

// The senders of the two kinds of scenario: spokes 0 to 99, or the heavy
// spoke first and spokes 1 to 99.
var (
	equalSenders = func() []int {
		s := make([]int, active)
		for i := range s {
			s[i] = i
		}
		return s
	}()
	heavySenders = append([]int{heavySpoke}, equalSenders[1:]...)
)

// TestFairness runs four scenarios on one gateway with 1,000 configured
// peers: 100 equal senders as fast as they can, then one heavy sender
// among 99 light ones, each outbound (the gateway's TUN reader routes to
// 100 peers) and inbound (100 peers to the gateway). It prints the shares;
// it asserts only that every sender got packets through.
func TestFairness(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 102 devices; skipped with -short")
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	start := time.Now()
	tb := newTestbed(t, ctx)
	t.Logf("gateway with %d configured peers and %d spokes up, handshakes done, in %v", configured, spokes, time.Since(start).Round(time.Millisecond))
	length := runLength(t)
	out, in := directions(tb)
	rows := []row{
		// Outbound all senders share the gateway's one TUN queue; one
		// injector fills it in turn, as the queue of 100 saturating flows
		// would hold them, so that what the gateway is offered is known.
		measure(t, tb, out, length, equalSenders, "100 equal, saturating", func(ctx context.Context, c *loadCounts) {
			roundRobin(ctx, out, schedule(equalSenders, 1), c)
		}),
		measure(t, tb, out, length, heavySenders, "1 heavy (10x) + 99 light, saturating", func(ctx context.Context, c *loadCounts) {
			roundRobin(ctx, out, schedule(heavySenders, heavyFactor), c)
		}),
	}
	// Inbound every spoke sends as fast as its own device can.
	eq := measure(t, tb, in, length, equalSenders, "100 equal, as fast as they can", func(ctx context.Context, c *loadCounts) {
		flood(ctx, in, equalSenders, c)
	})
	// Then each light spoke offers 2x its fair share of what that run
	// delivered, and the heavy one 10x that, so the gateway is overloaded
	// and must choose.
	light := 2 * eq.pps / active
	hv := measure(t, tb, in, length, heavySenders, fmt.Sprintf("1 heavy (10x) + 99 light at %.0f pkt/s", light), func(ctx context.Context, c *loadCounts) {
		paced(ctx, in, heavySenders, light, c)
	})
	rows = append(rows, eq, hv)
	var b strings.Builder
	fmt.Fprintf(&b, "%d configured peers, %d senders, %v per scenario, %d-byte packets; a share is a sender's count over the fair share (total / 100)\n", configured, active, length, packetSize)
	printTable(&b, rows)
	t.Log("\n" + b.String())
}

// measure runs load for length and returns the shares of senders over the
// run after a warm-up of a tenth of it. With more than one kind of sender
// (senders[0] is the heavy one when heavy), the shares are the light
// senders', against the fair share of all 100. It fails the test if a
// sender got nothing through.
func measure(t *testing.T, tb *testbed, d direction, length time.Duration, senders []int, scenario string, load func(context.Context, *loadCounts)) row {
	t.Helper()
	heavy := senders[0] == heavySpoke
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var lc loadCounts
	wg.Go(func() { load(ctx, &lc) })
	time.Sleep(length / 10)
	before, offBefore, sentBefore, dropsBefore, refusedBefore, t0 := snapshot(d.counts), snapshot(&lc.offered), d.sent(), tb.drops(), lc.refused.Load(), time.Now()
	time.Sleep(length)
	after, offAfter, sentAfter, dropsAfter, refusedAfter, t1 := snapshot(d.counts), snapshot(&lc.offered), d.sent(), tb.drops(), lc.refused.Load(), time.Now()
	cancel()
	wg.Wait()
	time.Sleep(200 * time.Millisecond) // let the queues drain before the next run
	got, sent, off := make([]uint64, active), make([]uint64, active), make([]uint64, active)
	for k, i := range senders {
		got[k], sent[k], off[k] = after[i]-before[i], sentAfter[i]-sentBefore[i], offAfter[i]-offBefore[i]
		if got[k] == 0 {
			t.Errorf("%s, %s: sender %d got nothing through in %v", scenario, d.name, i, length)
		}
	}
	all := summarise(got, 0)
	r := row{scenario: scenario, dir: d.name, pps: float64(all.total) / t1.Sub(t0).Seconds(), all: all.jain, light: all}
	r.mbps = r.pps * packetSize / 1e6
	allSent, allOff := summarise(sent, 0), summarise(off, 0)
	r.sent, r.offered = allSent, allOff
	// The gateway's own treatment: what it passed on of what reached it,
	// per peer, relative to all peers (1 is proportional).
	pin, pout := off, sent // outbound: offered to its TUN, sent by it
	if d.in {
		pin, pout = sent, got // inbound: sent by the spokes, delivered by it
	}
	r.passMin, r.passMax = passRange(pin, pout)
	if heavy {
		r.offered = summarise(off[1:], allOff.fair)
		r.heavyOffered = float64(off[0]) / allOff.fair
		r.light = summarise(got[1:], all.fair)
		r.heavy = float64(got[0]) / all.fair
		r.sent = summarise(sent[1:], allSent.fair)
		r.heavySent = float64(sent[0]) / allSent.fair
	}
	dropsAfter["refused_at_sender_tun"] = refusedAfter
	dropsBefore["refused_at_sender_tun"] = refusedBefore
	r.drops = dropDiff(dropsBefore, dropsAfter)
	return r
}

// passRange returns the least and greatest of out[i]/in[i] over all
// senders, each relative to Σout/Σin.
func passRange(in, out []uint64) (lo, hi float64) {
	var si, so float64
	for i := range in {
		si += float64(in[i])
		so += float64(out[i])
	}
	if si == 0 || so == 0 {
		return 0, 0
	}
	lo = math.Inf(1)
	for i := range in {
		if in[i] == 0 {
			continue
		}
		p := float64(out[i]) / float64(in[i]) / (so / si)
		lo, hi = min(lo, p), max(hi, p)
	}
	return lo, hi
}

// loadCounts are what a load generator offered and what its TUNs refused.
type loadCounts struct {
	offered [spokes]atomic.Uint64 // packets a TUN accepted, by sender
	refused atomic.Uint64         // packets a full TUN queue refused
}

// dropDiff lists the counters that grew, as "name +n".
func dropDiff(before, after map[string]uint64) string {
	var out []string
	for name, v := range after {
		if v > before[name] {
			out = append(out, fmt.Sprintf("%s +%d", name, v-before[name]))
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// flood has every sender inject as fast as its own TUN takes packets:
// one goroutine each, waiting for room.
func flood(ctx context.Context, d direction, senders []int, c *loadCounts) {
	var wg sync.WaitGroup
	for _, i := range senders {
		wg.Go(func() {
			tun, pkt := d.inject(i), d.pkt(i)
			for tun.InjectContext(ctx, pkt) == nil {
				c.offered[i].Add(1)
			}
		})
	}
	wg.Wait()
}

// schedule is one round of roundRobin: each sender once, and the first
// weight times, spread evenly through the round.
func schedule(senders []int, weight int) []int {
	var s []int
	every := len(senders) / weight
	for k, i := range senders {
		s = append(s, i)
		if weight > 1 && k%every == every-1 && k/every < weight-1 {
			s = append(s, senders[0])
		}
	}
	return s
}

// roundRobin injects the senders' packets into one TUN in the order of
// round, over and over, waiting for room.
func roundRobin(ctx context.Context, d direction, round []int, c *loadCounts) {
	tun := d.inject(round[0])
	pkts := make(map[int][]byte)
	for _, i := range round {
		pkts[i] = d.pkt(i)
	}
	for {
		for _, i := range round {
			if tun.InjectContext(ctx, pkts[i]) != nil {
				return
			}
			c.offered[i].Add(1)
		}
	}
}

// paced offers light packets a second for each sender and heavyFactor
// times that for senders[0], from one goroutine on a 2 ms tick. A packet
// its TUN has no room for is refused and counted, as a full TUN queue
// drops; the order of senders rotates each tick so none is always last.
func paced(ctx context.Context, d direction, senders []int, light float64, c *loadCounts) {
	tuns := make([]*memtun.Device, len(senders))
	pkts := make([][]byte, len(senders))
	credit := make([]float64, len(senders))
	for k, i := range senders {
		tuns[k], pkts[k] = d.inject(i), d.pkt(i)
	}
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	for rot := 0; ; rot++ {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			dt := now.Sub(last).Seconds()
			last = now
			for k := range credit {
				rate := light
				if k == 0 {
					rate *= heavyFactor
				}
				credit[k] = min(credit[k]+rate*dt, rate*0.02) // at most 20 ms of backlog
			}
			offer(tuns, pkts, senders, credit, rot, c)
		}
	}
}

// offer injects one packet per sender with a whole credit left, round
// after round, until no sender has one.
func offer(tuns []*memtun.Device, pkts [][]byte, senders []int, credit []float64, rot int, c *loadCounts) {
	for more := true; more; {
		more = false
		for j := range credit {
			k := (j + rot) % len(credit)
			if credit[k] < 1 {
				continue
			}
			credit[k]--
			more = true
			if err := tuns[k].Inject(pkts[k]); err != nil {
				c.refused.Add(1)
			} else {
				c.offered[senders[k]].Add(1)
			}
		}
	}
}
