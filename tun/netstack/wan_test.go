package netstack

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/devicetest"
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
	{name: "cubic", opts: Options{CongestionControl: "cubic"}},
	{name: "norack", opts: Options{DisableRACK: true}},
	{name: "nosack", noSACK: true},
	{name: "nomoderate", noModerate: true},
	{name: "buf4M", opts: Options{TCPReceiveBufferMax: 4 << 20, TCPSendBuffer: 4 << 20}},
	{name: "buf8M", opts: Options{TCPReceiveBufferMax: 8 << 20, TCPSendBuffer: 8 << 20}},
	{name: "buf16M", opts: Options{TCPReceiveBufferMax: 16 << 20, TCPSendBuffer: 16 << 20}},
}

// TestNetstackWAN measures one TCP stream between two netstack Nets
// through two fips-go devices over an in-memory network with one-way delay
// and random loss, for each candidate setting, and logs a table of median
// throughputs. It is a measurement, not a check: it asserts only that
// bytes flowed, and runs only with FIPS_NETSTACK_WAN=1.
//
//	FIPS_NETSTACK_WAN=1 nice -n 10 go test -count=1 -timeout 2h \
//	    -run 'TestNetstackWAN' -v ./tun/netstack/
//
// FIPS_NETSTACK_WAN_SECONDS (default 10) is each run's length,
// FIPS_NETSTACK_WAN_RUNS (default 3) the runs per case, and
// FIPS_NETSTACK_WAN_SETTINGS (comma-separated names; default all) and
// FIPS_NETSTACK_WAN_DELAYS (milliseconds, default "20,60") narrow the table.
func TestNetstackWAN(t *testing.T) {
	if os.Getenv("FIPS_NETSTACK_WAN") != "1" {
		t.Skip("a measurement of several minutes; set FIPS_NETSTACK_WAN=1 to run it")
	}
	secs := envInt(t, "FIPS_NETSTACK_WAN_SECONDS", 10)
	runs := envInt(t, "FIPS_NETSTACK_WAN_RUNS", 3)
	settings := wanSettings
	if s := os.Getenv("FIPS_NETSTACK_WAN_SETTINGS"); s != "" {
		names := strings.Split(s, ",")
		settings = slices.DeleteFunc(slices.Clone(settings), func(w wanSetting) bool { return !slices.Contains(names, w.name) })
	}
	delays := []time.Duration{20 * time.Millisecond, 60 * time.Millisecond}
	if s := os.Getenv("FIPS_NETSTACK_WAN_DELAYS"); s != "" {
		delays = nil
		for _, f := range strings.Split(s, ",") {
			ms, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("FIPS_NETSTACK_WAN_DELAYS: %v", err)
			}
			delays = append(delays, time.Duration(ms)*time.Millisecond)
		}
	}
	losses := []float64{0, 0.001, 0.01}

	var table strings.Builder
	fmt.Fprintf(&table, "%-11s", "Mbit/s")
	for _, d := range delays {
		for _, l := range losses {
			fmt.Fprintf(&table, " %13s", fmt.Sprintf("%dms/%.1f%%", d.Milliseconds()*2, l*100))
		}
	}
	table.WriteString("\n")
	for _, s := range settings {
		fmt.Fprintf(&table, "%-11s", s.name)
		for _, d := range delays {
			for _, l := range losses {
				name := fmt.Sprintf("%s/rtt%dms/loss%g", s.name, d.Milliseconds()*2, l*100)
				var got []float64
				t.Run(name, func(t *testing.T) {
					for r := range runs {
						// A subtest per run, so that its cleanups tear
						// the run's stacks and devices down before the next.
						t.Run(fmt.Sprint("run", r+1), func(t *testing.T) {
							nopts := membind.NetOptions{Delay: d, Loss: l, Seed: int64(r + 1), QueueLen: 1 << 15}
							got = append(got, wanRun(t, s, nopts, time.Duration(secs)*time.Second))
						})
					}
					t.Logf("%s: runs %.0f Mbit/s", name, got)
				})
				if len(got) == 0 {
					fmt.Fprintf(&table, " %13s", "-")
					continue
				}
				fmt.Fprintf(&table, " %13.0f", median(got))
			}
		}
		table.WriteString("\n")
	}
	t.Logf("median of %d runs of %d s, one TCP stream, columns RTT/loss:\n%s", runs, secs, table.String())
}

// median of xs (sorted in place); the mean of the middle two for an even
// count, so that two runs report their mean rather than the faster one.
func median(xs []float64) float64 {
	slices.Sort(xs)
	m := len(xs) / 2
	if len(xs)%2 == 0 {
		return (xs[m-1] + xs[m]) / 2
	}
	return xs[m]
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}

// wanRun streams from a to b for dur and returns the goodput in Mbit/s,
// counted from the moment the connection is up.
func wanRun(t *testing.T, s wanSetting, nopts membind.NetOptions, dur time.Duration) float64 {
	t.Helper()
	netw := membind.NewNetwork(nopts)
	na, nb := wanNet(t, s, addrA4), wanNet(t, s, addrB4)
	hostA, hostB := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	da, ka := devicetest.New(t, na, netw.NewBind(hostA), device.Options{})
	db, kb := devicetest.New(t, nb, netw.NewBind(hostB), device.Options{})
	ep := netip.AddrPortFrom(hostB, db.Status().ListenPort)
	pa, pb := ka.PublicKey(), kb.PublicKey()
	if err := da.Apply(&device.Config{Peers: []device.PeerConfig{{PublicKey: pb, Endpoint: &ep,
		AllowedIPs: []device.AllowedIPChange{{Prefix: netip.PrefixFrom(addrB4, 32)}}}}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Apply(&device.Config{Peers: []device.PeerConfig{{PublicKey: pa,
		AllowedIPs: []device.AllowedIPChange{{Prefix: netip.PrefixFrom(addrA4, 32)}}}}}); err != nil {
		t.Fatal(err)
	}

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
	ns := netw.Stats()
	t.Logf("%.0f Mbit/s, %d retransmits; network lost %d of %d, queue drops %d; device drops %s",
		float64(n)*8/dur.Seconds()/1e6, na.Stats().TCPRetransmits, ns.Lost, ns.Sent, ns.QueueDrops,
		wanDrops(da, db))
	return float64(n) * 8 / dur.Seconds() / 1e6
}

func wanNet(t *testing.T, s wanSetting, addr netip.Addr) *Net {
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
