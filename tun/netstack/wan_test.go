package netstack

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/internal/testkit/devicetest"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
)

// wanSetting is one candidate TCP configuration: Options plus the two
// switches that are not Options fields (SACK and receive-buffer
// moderation), which the measurement sets on the stack directly.
type wanSetting struct {
	name       string
	opts       Options
	noSACK     bool
	noModerate bool
}

// wanSettings are the defaults and one change from them each.
var wanSettings = []wanSetting{
	{name: "default", opts: Options{}},
	{name: "cubic", opts: Options{congestionControl: "cubic"}},
	{name: "norack", opts: Options{disableRACK: true}},
	{name: "slack2ms", opts: Options{TimerSlack: 2 * time.Millisecond}},
	{name: "nosack", noSACK: true},
	{name: "nomoderate", noModerate: true},
	{name: "buf4M", opts: Options{tcpReceiveBufferMax: 4 << 20, tcpSendBuffer: 4 << 20}},
	{name: "buf8M", opts: Options{tcpReceiveBufferMax: 8 << 20, tcpSendBuffer: 8 << 20}},
	{name: "buf16M", opts: Options{tcpReceiveBufferMax: 16 << 20, tcpSendBuffer: 16 << 20}},
}

// wanRunTime is how long one b.N iteration of BenchmarkNetstackWAN
// streams; each iteration draws a loss pattern of its own.
const wanRunTime = 10 * time.Second

// wanSeed numbers runs, so that each draws a different loss pattern.
var wanSeed atomic.Int64

// BenchmarkNetstackWAN measures one TCP stream between two netstack Nets
// through two fips-go devices over an in-memory network with one-way delay
// and random loss, for each candidate setting, round-trip time and loss
// rate, and reports the goodput and the sender's retransmits per run. A
// run takes wanRunTime, so the whole table takes minutes: pick cases with
// -bench and compare settings with benchstat.
//
//	nice -n 10 go test -run '^$' -bench 'NetstackWAN/(default|cubic)/rtt40ms' \
//	    -benchtime 1x -count 3 -timeout 2h ./tun/netstack/
func BenchmarkNetstackWAN(b *testing.B) {
	delays := []time.Duration{0, 20 * time.Millisecond, 60 * time.Millisecond}
	losses := []float64{0, 0.001, 0.01}
	for _, s := range wanSettings {
		for _, d := range delays {
			for _, l := range losses {
				b.Run(fmt.Sprintf("%s/rtt%dms/loss%g", s.name, d.Milliseconds()*2, l*100), func(b *testing.B) {
					var mbits, retrans float64
					for range b.N {
						nopts := membind.NetOptions{Delay: d, Loss: l, Seed: wanSeed.Add(1), QueueLen: 1 << 15}
						m, r := wanRun(b, s, nopts, wanRunTime)
						mbits += m
						retrans += float64(r)
					}
					b.ReportMetric(mbits/float64(b.N), "Mbit/s")
					b.ReportMetric(retrans/float64(b.N), "retransmits/run")
				})
			}
		}
	}
}

// scope is a test with cleanups of its own, run by close, so that one
// benchmark iteration's stacks and devices are gone before the next's.
type scope struct {
	testing.TB
	cleanups []func()
}

func (s *scope) Cleanup(f func()) { s.cleanups = append(s.cleanups, f) }

func (s *scope) close() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
}

// wanRun streams from a to b for dur and returns the goodput in Mbit/s,
// counted from the moment the connection is up, and a's retransmits.
func wanRun(b *testing.B, s wanSetting, nopts membind.NetOptions, dur time.Duration) (float64, uint64) {
	b.Helper()
	t := &scope{TB: b}
	defer t.close()
	na, nb := wanNet(t, s, addrA4), wanNet(t, s, addrB4)
	p := devicetest.NewPair(t, devicetest.PairOptions{Net: nopts, TunA: na, TunB: nb, AddrA: addrA4, AddrB: addrB4})

	l, err := nb.ListenTCPAddrPort(netip.AddrPortFrom(addrB4, 5201))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var received atomic.Int64
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 256<<10)
		for {
			n, err := c.Read(buf)
			received.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var c net.Conn
	for c == nil { // the handshake may be lost: retry
		if c, err = na.DialTCPAddrPort(ctx, netip.AddrPortFrom(addrB4, 5201)); err != nil && ctx.Err() != nil {
			t.Fatalf("no connection: %v", err)
		}
	}
	defer c.Close()
	go func() {
		buf := make([]byte, 256<<10)
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	start := received.Load()
	time.Sleep(dur)
	n := received.Load() - start
	if n == 0 {
		t.Fatalf("nothing arrived in %v", dur)
	}
	mbits, retrans := float64(n)*8/dur.Seconds()/1e6, na.Stats().TCPRetransmits
	ns := p.Net.Stats()
	t.Logf("%.0f Mbit/s, %d retransmits; network lost %d of %d, queue drops %d; device drops %s",
		mbits, retrans, ns.Lost, ns.Sent, ns.QueueDrops, wanDrops(p.A, p.B))
	return mbits, retrans
}

func wanNet(t testing.TB, s wanSetting, addr netip.Addr) *Net {
	t.Helper()
	o := s.opts
	o.Addresses = []netip.Addr{addr}
	n, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	var opts []tcpip.SettableTransportProtocolOption
	if s.noSACK {
		sack := tcpip.TCPSACKEnabled(false)
		opts = append(opts, &sack)
	}
	if s.noModerate {
		m := tcpip.TCPModerateReceiveBufferOption(false)
		opts = append(opts, &m)
	}
	for _, opt := range opts {
		if err := n.stack.SetTransportProtocolOption(tcp.ProtocolNumber, opt); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// wanDrops lists the devices' nonzero drop counters, so that a run's
// retransmits can be told apart from the network's loss (the devices' AQM
// drops too when their queues stand).
func wanDrops(ds ...*device.Device) string {
	sum := map[string]uint64{}
	for _, d := range ds {
		for _, c := range d.Status().Counters {
			if strings.Contains(c.Name, "drop") && c.Value > 0 {
				sum[c.Name] += c.Value
			}
		}
	}
	return fmt.Sprint(sum)
}
