package cli

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"text/tabwriter"
	"time"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/app/bench"
	"github.com/fips-go/fips-go/internal/engine"
	"github.com/fips-go/fips-go/ipc"
	"github.com/fips-go/fips-go/tun/netstack"
	"github.com/urfave/cli/v3"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "rootless self-benchmark: TCP through two fips-go devices over loopback UDP",
		Description: "Starts two devices in this process, each with a userspace (netstack) TUN,\n" +
			"joins them with real UDP sockets on 127.0.0.1, runs TCP through the tunnel\n" +
			"and prints throughput, CPU seconds per GB, handshake time and peak memory.\n" +
			"Needs no root and no configuration.",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "duration", Aliases: []string{"t"}, Value: 10 * time.Second, Usage: "how long to send"},
			&cli.IntFlag{Name: "streams", Aliases: []string{"P"}, Value: 1, Usage: "parallel TCP streams"},
			&cli.StringFlag{Name: "direction", Value: "forward", Usage: "forward: the initiator sends; reverse: the responder sends"},
			&cli.IntFlag{Name: "mtu", Value: 1420, Usage: "tunnel MTU"},
			&cli.BoolFlag{Name: "json", Usage: "print the result as one JSON object (for scripts and CI)"},
			&cli.StringFlag{Name: "mode", Value: "netstack", Usage: "netstack: TCP in both netstacks; socks5: the sender connects through a SOCKS5 proxy on loopback; userns: sender and receiver in two user namespaces with kernel TUNs, as userspace -- CMD does"},
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			dir := c.String("direction")
			if dir != "forward" && dir != "reverse" {
				return fmt.Errorf("bench: --direction must be forward or reverse, not %q", dir)
			}
			st, err := readSettings(os.Getenv)
			if err != nil {
				return err
			}
			cfg := benchConfig{
				settings: st,
				duration: c.Duration("duration"),
				streams:  int(c.Int("streams")),
				reverse:  dir == "reverse",
				mtu:      int(c.Int("mtu")),
				json:     c.Bool("json"),
				out:      c.Root().Writer,
				log:      c.Root().ErrWriter,
				mode:     c.String("mode"),
			}
			switch cfg.mode {
			case "netstack", "socks5":
				return runBench(ctx, cfg)
			case "userns":
				if cfg.reverse {
					return fmt.Errorf("bench: --mode userns measures one direction only")
				}
				return runBenchUserns(ctx, cfg)
			}
			return fmt.Errorf("bench: --mode must be netstack, socks5 or userns, not %q", cfg.mode)
		},
	}
}

type benchConfig struct {
	duration time.Duration
	streams  int
	reverse  bool
	mtu      int
	json     bool      // the result as JSON instead of a table
	out, log io.Writer // result; progress and notes
	mode     string    // netstack, socks5 or userns
	settings settings  // FIPS_GO_MEMPROFILE
}

type benchNode struct {
	eng  *engine.Engine
	ns   *netstack.Net
	dev  *device.Device
	addr netip.Addr
	key  noise.PrivateKey
}

func newBenchNode(addr netip.Addr, mtu int) (*benchNode, error) {
	q, key, err := benchQuick(addr, mtu)
	if err != nil {
		return nil, err
	}
	e, err := engine.StartNetstack(q, netstack.Options{}, engine.Options{})
	if err != nil {
		return nil, err
	}
	return &benchNode{eng: e, ns: e.Net, dev: e.Device, addr: addr, key: key}, nil
}

func (n *benchNode) close() { n.eng.Close() }

// benchQuick is the configuration of a bench device: a fresh key and the
// tunnel address addr.
func benchQuick(addr netip.Addr, mtu int) (*ipc.QuickConfig, noise.PrivateKey, error) {
	key, err := noise.GeneratePrivateKey(rand.Reader)
	if err != nil {
		return nil, key, err
	}
	return &ipc.QuickConfig{
		Config:    &device.Config{PrivateKey: &key},
		Addresses: []netip.Prefix{netip.PrefixFrom(addr, addr.BitLen())},
		MTU:       mtu,
	}, key, nil
}

// peerWithKey adds a peer that n learns the endpoint of from its handshake.
func (n *benchNode) peerWithKey(pub noise.PublicKey, addr netip.Addr) error {
	return n.dev.Apply(&device.Config{Peers: []device.PeerConfig{{
		PublicKey:  pub,
		AllowedIPs: []device.AllowedIPChange{{Prefix: netip.PrefixFrom(addr, addr.BitLen())}},
	}}})
}

// peerWith points n at other over loopback UDP.
func (n *benchNode) peerWith(other *benchNode) error {
	return peerOverLoopback(n.dev, other.dev, other.key.PublicKey(), other.addr)
}

// peerOverLoopback adds to d the peer with key pub, reached at the UDP
// port of its device other on 127.0.0.1, that owns the tunnel address addr.
// Both bench modes join their two devices this way.
func peerOverLoopback(d, other *device.Device, pub noise.PublicKey, addr netip.Addr) error {
	ep := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), other.Status().ListenPort)
	return d.Apply(&device.Config{Peers: []device.PeerConfig{{
		PublicKey:  pub,
		Endpoint:   &ep,
		AllowedIPs: []device.AllowedIPChange{{Prefix: netip.PrefixFrom(addr, addr.BitLen())}},
	}}})
}

func runBench(ctx context.Context, cfg benchConfig) error {
	a, err := newBenchNode(netip.MustParseAddr("10.99.0.1"), cfg.mtu)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer a.close()
	b, err := newBenchNode(netip.MustParseAddr("10.99.0.2"), cfg.mtu)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer b.close()
	if err := a.peerWith(b); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := b.peerWith(a); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	// a initiates (its first packet triggers the handshake); the sender is a
	// unless reversed.
	sender, sink := a, b
	if cfg.reverse {
		sender, sink = b, a
	}
	ln, err := sink.ns.ListenTCPAddrPort(netip.AddrPortFrom(sink.addr, 5201))
	if err != nil {
		return fmt.Errorf("bench: listen: %w", err)
	}
	defer ln.Close()

	hs, err := warmUp(ctx, a, b)
	if err != nil {
		return fmt.Errorf("bench: handshake: %w", err)
	}
	fmt.Fprintf(cfg.log, "fips-go bench: %d stream(s), %v, MTU %d, %s; handshake done in %v\n",
		cfg.streams, cfg.duration, cfg.mtu, cfg.direction(), hs.Round(time.Microsecond))
	// Carriage-return updates suit a terminal; in a log they would run
	// together into one line, so there each update is a line of its own.
	live := isTerminal(cfg.log)
	dialTo := netip.AddrPortFrom(sink.addr, 5201)
	dial := func(ctx context.Context) (net.Conn, error) { return sender.ns.DialTCPAddrPort(ctx, dialTo) }
	if cfg.mode == "socks5" {
		server, err := startBenchSOCKS5(ctx, sender)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		fmt.Fprintf(cfg.log, "fips-go bench: the sender connects through SOCKS5 on %s\n", server)
		dial = func(ctx context.Context) (net.Conn, error) { return socks5Dial(ctx, server, dialTo) }
	}
	res, err := bench.TCP(ctx, ln, dial, bench.Options{
		Duration: cfg.duration,
		Streams:  cfg.streams,
		Progress: func(el time.Duration, n uint64) {
			io.WriteString(cfg.log, progressLine(el, n, live))
		},
	})
	if live {
		fmt.Fprintln(cfg.log)
	}
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	cfg.settings.writeHeapProfile("bench", func(f string, a ...any) { fmt.Fprintf(cfg.log, "fips-go bench: "+f+"\n", a...) })
	if cfg.json {
		return writeBenchJSON(cfg.out, cfg, res, hs)
	}
	return writeBenchTable(cfg.out, res, hs, "both devices, both stacks, this process")
}

func (cfg benchConfig) direction() string {
	if cfg.reverse {
		return "reverse"
	}
	return "forward"
}

// progressLine is one progress update: rewriting the line in place on a
// terminal, a line of its own otherwise.
func progressLine(el time.Duration, n uint64, live bool) string {
	s := fmt.Sprintf("  %5.1fs  %8.1f MiB  %6.2f Gbit/s", el.Seconds(), float64(n)/(1<<20), float64(n)*8/el.Seconds()/1e9)
	if live {
		return "\r" + s + " "
	}
	return s + "\n"
}

// writeBenchTable prints res; cpuWhose says whose CPU the figure counts.
// A mode that does not measure the handshake (hs 0) or this process's
// peak memory (MaxRSSKB 0) leaves that row out.
func writeBenchTable(w io.Writer, res bench.Result, hs time.Duration, cpuWhose string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "metric\tvalue\n")
	fmt.Fprintf(tw, "throughput\t%.2f Gbit/s\n", res.Gbps())
	fmt.Fprintf(tw, "transferred\t%.1f MiB in %.1fs\n", float64(res.Bytes)/(1<<20), res.Elapsed.Seconds())
	fmt.Fprintf(tw, "CPU per GB\t%.2f s (%s)\n", res.CPUPerGB(), cpuWhose)
	if hs > 0 {
		fmt.Fprintf(tw, "handshake\t%v\n", hs.Round(time.Microsecond))
	}
	if res.MaxRSSKB > 0 {
		fmt.Fprintf(tw, "peak RSS\t%.1f MiB\n", float64(res.MaxRSSKB)/1024)
	}
	return tw.Flush()
}

// benchJSON is the result table for scripts: base units, names that say
// them.
type benchJSON struct {
	Streams        int     `json:"streams"`
	Direction      string  `json:"direction"`
	MTU            int     `json:"mtu"`
	ThroughputGbps float64 `json:"throughput_gbit_per_s"`
	Bytes          uint64  `json:"bytes"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	CPUSecondsGB   float64 `json:"cpu_seconds_per_gb"`
	HandshakeSecs  float64 `json:"handshake_seconds"`
	PeakRSSBytes   int64   `json:"peak_rss_bytes"`
}

func writeBenchJSON(w io.Writer, cfg benchConfig, res bench.Result, hs time.Duration) error {
	return json.NewEncoder(w).Encode(benchJSON{
		Streams:        cfg.streams,
		Direction:      cfg.direction(),
		MTU:            cfg.mtu,
		ThroughputGbps: res.Gbps(),
		Bytes:          res.Bytes,
		ElapsedSeconds: res.Elapsed.Seconds(),
		CPUSecondsGB:   res.CPUPerGB(),
		HandshakeSecs:  hs.Seconds(),
		PeakRSSBytes:   res.MaxRSSKB * 1024,
	})
}

// warmUp sends one UDP datagram from a to b, which starts the handshake, and
// returns how long the handshake took as a's device recorded it.
func warmUp(ctx context.Context, a, b *benchNode) (time.Duration, error) {
	pc, err := b.ns.ListenUDPAddrPort(netip.AddrPortFrom(b.addr, 9))
	if err != nil {
		return 0, err
	}
	defer pc.Close()
	c, err := a.ns.DialUDPAddrPort(netip.AddrPortFrom(a.addr, 0), netip.AddrPortFrom(b.addr, 9))
	if err != nil {
		return 0, err
	}
	defer c.Close()
	start := time.Now()
	deadline := start.Add(10 * time.Second)
	buf := make([]byte, 16)
	for time.Now().Before(deadline) {
		if _, err := c.Write([]byte("hello")); err != nil {
			return 0, err
		}
		pc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, _, err := pc.ReadFrom(buf); err == nil {
			st := a.dev.Status()
			if len(st.Peers) == 1 && !st.Peers[0].LastHandshake.IsZero() {
				return st.Peers[0].LastHandshake.Sub(start), nil
			}
			return time.Since(start), nil
		}
	}
	return 0, fmt.Errorf("no packet crossed the tunnel within 10s")
}
