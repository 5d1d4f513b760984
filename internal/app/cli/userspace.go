package cli

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/app/exit"
	"github.com/fips-go/fips-go/internal/app/metrics"
	"github.com/fips-go/fips-go/internal/app/proxy"
	"github.com/fips-go/fips-go/internal/app/rootless"
	"github.com/fips-go/fips-go/internal/engine"
	"github.com/fips-go/fips-go/ipc"
	"github.com/fips-go/fips-go/tun/netstack"
	"github.com/urfave/cli/v3"
)

// The rootless modes: a command in a network namespace of its own
// (userns.go), or the tunnel's far side reached through a userspace
// TCP/IP stack with proxies, port forwards and ping (netstack.go). No
// root, no capabilities.

func userspaceCommand() *cli.Command {
	return &cli.Command{
		Name:      "userspace",
		Usage:     "run a tunnel without root: a command in its own network namespace, or a userspace TCP/IP stack with proxies and port forwards",
		ArgsUsage: "[-- CMD [ARGS...]]",
		Description: "Example: run curl through the tunnel, in a user and network namespace of its own:\n" +
			"  fips-go userspace -c wg0.conf -- curl http://10.0.0.1/\n" +
			"Example: a SOCKS5 proxy and an HTTP proxy into the tunnel (names resolved with the config's DNS):\n" +
			"  fips-go userspace -c wg0.conf --socks5 1080 --http 8080\n" +
			"Example: reach 10.0.0.1:80 inside the tunnel at 127.0.0.1:8080 on this machine:\n" +
			"  fips-go userspace -c wg0.conf -L 127.0.0.1:8080=10.0.0.1:80\n" +
			"Example: a WireGuard server whose peers reach the internet through this host, without root:\n" +
			"  fips-go userspace -c server.conf --exit\n" +
			"Listeners bind to loopback unless an address is named.\n" +
			"The config file is wg-quick(8)'s format: [Interface] PrivateKey, Address, DNS, MTU, ListenPort; [Peer] ...\n" +
			"A UAPI socket is served in --socket-dir, so `WG_SOCKET_DIR=DIR fips-go show NAME` works.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Required: true, Usage: "wg-quick config file ([Interface] Address, DNS, MTU, ListenPort are used; flags override them)"},
			&cli.StringSliceFlag{Name: "address", Aliases: []string{"a"}, Usage: "this side's tunnel address, e.g. 10.0.0.2/24 (repeatable; default: the file's Address)"},
			&cli.StringSliceFlag{Name: "dns", Usage: "name server inside the tunnel (repeatable; default: the file's DNS)"},
			&cli.StringSliceFlag{Name: "forward", Aliases: []string{"L"}, Usage: "[tcp:|udp:][LOCAL=]REMOTE: accept on LOCAL ([host:]port) and connect to REMOTE (ip:port) inside the tunnel (repeatable)"},
			&cli.StringSliceFlag{Name: "reverse", Aliases: []string{"R"}, Usage: "[tcp:|udp:]REMOTE_PORT=LOCAL: accept inside the tunnel on REMOTE_PORT and connect to LOCAL ([host:]port) here (repeatable)"},
			&cli.StringFlag{Name: "socks5", Usage: "serve a SOCKS5 proxy (CONNECT, UDP ASSOCIATE) on [host:]port"},
			&cli.StringFlag{Name: "socks5-auth", Usage: "USER:PASS the SOCKS5 proxy requires (RFC 1929); every local user can read it from the command line, prefer --socks5-auth-file"},
			&cli.StringFlag{Name: "socks5-auth-file", Usage: "read the SOCKS5 proxy's USER:PASS from this file, which must be yours and mode 0600 or stricter"},
			&cli.StringFlag{Name: "http", Usage: "serve an HTTP proxy (CONNECT and http:// requests) on [host:]port"},
			&cli.StringFlag{Name: "ping", Usage: "ping ADDR through the tunnel, print the replies and exit"},
			&cli.IntFlag{Name: "count", Value: 4, Usage: "echo requests --ping sends"},
			&cli.IntFlag{Name: "max-conns", Value: proxy.DefaultMaxConns, Usage: "connections (and UDP flows) open at once, per proxy or forward"},
			&cli.DurationFlag{Name: "idle-timeout", Value: proxy.DefaultIdleTimeout, Usage: "close proxied connections and UDP flows idle this long"},
			&cli.IntFlag{Name: "mtu", Usage: "tunnel MTU (default: the file's MTU, else 1420)"},
			&cli.IntFlag{Name: "listen-port", Value: -1, Usage: "UDP port (default: the file's ListenPort, else any)"},
			&cli.StringFlag{Name: "name", Value: "fipsgo0", Usage: "interface name for the UAPI socket"},
			&cli.StringFlag{Name: "socket-dir", Usage: "where to put the UAPI socket (default $XDG_RUNTIME_DIR/fips-go or /tmp/fips-go-UID; \"none\" for no socket)"},
		}, append(exitFlags(), metricsFlags()...)...),
		Action: func(ctx context.Context, c *cli.Command) error {
			opts, err := userspaceOptionsFrom(c)
			if err != nil {
				return fmt.Errorf("userspace: %w", err)
			}
			if r, ok := ctx.Value(readyKey{}).(func([]net.Addr)); ok {
				opts.ready = r
			}
			if ctx.Value(inProcessKey{}) != nil {
				opts.settings.noSandbox = true
			}
			if c.Args().Len() > 0 {
				if opts.netstackMode() {
					return fmt.Errorf("userspace: --socks5, --http, -L, -R, --ping and --exit are netstack modes; they do not combine with -- CMD")
				}
				return runUserspaceCmd(opts, c.Args().Slice())
			}
			ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runUserspace(ctx, opts)
		},
	}
}

// readyKey carries a callback told the forwarders' local addresses once
// they listen (tests use it to learn a port-0 address).
type readyKey struct{}

// inProcessKey marks a mode run inside a test's own process, which a
// sandbox, once applied, could not leave: the sandbox stays off there
// (the end-to-end tests run the binary with it on).
type inProcessKey struct{}

type userspaceOptions struct {
	cfg        *device.Config
	names      map[noise.PublicKey]string // peers whose Endpoint is a host name
	ignored    []string                   // the file's wg-quick lines that mean nothing here
	source     string                     // the config file's path
	metrics    metricsConfig
	settings   settings
	reverses   []rootless.Reverse
	exit       exitOptions
	idleExit   time.Duration // --idle-timeout when given, else 0 (the exit's default)
	socks5     string        // listen address, "" for none
	socks5Auth string        // USER:PASS, "" for none
	httpProxy  string
	ping       netip.Addr
	count      int
	maxConns   int
	idle       time.Duration
	notef      func(string, ...any) // what the user should see (listeners, ping replies)
	prefixes   []netip.Prefix       // the tunnel addresses with their subnets
	addrs      []netip.Addr
	dns        []netip.Addr
	dnsSearch  []string
	forwards   []rootless.Forward
	mtu        int
	name       string
	nameSet    bool   // --name given: never pick another
	socketDir  string // "" for none
	logf       func(string, ...any)
	ready      func(locals []net.Addr) // called once listening (tests)
}

func userspaceOptionsFrom(c *cli.Command) (userspaceOptions, error) {
	o := userspaceOptions{name: c.String("name"), nameSet: c.IsSet("name"), metrics: metricsConfigFrom(c)}
	var err error
	if o.settings, err = readSettings(os.Getenv); err != nil {
		return o, err
	}
	o.logf, _ = loggers("fips-go(userspace): ")
	o.notef = func(format string, args ...any) {
		if os.Getenv(envLogLevel) != "silent" {
			fmt.Fprintf(os.Stderr, "fips-go: "+format+"\n", args...)
		}
	}
	o.metrics.announce = o.notef
	f, err := os.Open(c.String("config"))
	if err != nil {
		return o, err
	}
	defer f.Close()
	q, err := ipc.ParseQuickConfigFile(f, c.String("config"), resolveHost)
	if err != nil {
		return o, err
	}
	o.cfg, o.names, o.ignored, o.source = q.Config, q.Names, q.Ignored, c.String("config")
	if err := o.applyFile(q, c); err != nil {
		return o, err
	}
	if err := o.netstackFlags(c); err != nil {
		return o, err
	}
	o.socketDir = c.String("socket-dir")
	switch o.socketDir {
	case "none":
		o.socketDir = ""
	case "":
		if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
			o.socketDir = d + "/fips-go"
		} else {
			o.socketDir = fmt.Sprintf("%s/fips-go-%d", os.TempDir(), os.Getuid())
		}
	}
	return o, nil
}

// applyFile takes addresses, DNS, MTU and listen port from the wg-quick
// file q unless a flag names them.
func (o *userspaceOptions) applyFile(q *ipc.QuickConfig, c *cli.Command) error {
	o.prefixes = q.Addresses
	if s := c.StringSlice("address"); len(s) > 0 {
		o.prefixes = nil
		for _, v := range s {
			p, err := netip.ParsePrefix(v)
			if err != nil {
				a, aerr := netip.ParseAddr(v)
				if aerr != nil {
					return fmt.Errorf("--address %q: want an address like 10.0.0.2/24", v)
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			o.prefixes = append(o.prefixes, p)
		}
	}
	if len(o.prefixes) == 0 {
		return fmt.Errorf("%s has no Address in [Interface]; add one (e.g. Address = 10.0.0.2/24) or pass --address", c.String("config"))
	}
	for _, p := range o.prefixes {
		o.addrs = append(o.addrs, p.Addr())
	}
	o.dns = q.DNS
	o.dnsSearch = q.DNSSearch
	if s := c.StringSlice("dns"); len(s) > 0 {
		o.dns = nil
		for _, v := range s {
			a, err := netip.ParseAddr(v)
			if err != nil {
				return fmt.Errorf("--dns %q: want an IP address", v)
			}
			o.dns = append(o.dns, a.Unmap())
		}
	}
	o.mtu = cmp.Or(int(c.Int("mtu")), q.MTU, netstack.DefaultMTU)
	if p := c.Int("listen-port"); p >= 0 {
		if p > 65535 {
			return fmt.Errorf("--listen-port %d: want 0 to 65535", p)
		}
		port := uint16(p)
		o.cfg.ListenPort = &port
	}
	return nil
}

// quick is the configuration as the file and the flags give it.
func (o *userspaceOptions) quick() *ipc.QuickConfig {
	return &ipc.QuickConfig{
		Config: o.cfg, Addresses: o.prefixes, DNS: o.dns, DNSSearch: o.dnsSearch,
		MTU: o.mtu, Names: o.names, Ignored: o.ignored,
	}
}

// engineOptions start the mode's device.
func (o *userspaceOptions) engineOptions() engine.Options {
	eo := engine.Options{Logf: o.logf, Source: o.source, Bind: o.settings.bind(o.logf)}
	eo.Device.PathProbes = o.settings.pathProbes
	// Where the peers were, for the next run (device/resume.go): beside
	// the UAPI socket, opened before the sandbox applies.
	if o.socketDir != "" && privateSocketDir(o.socketDir, os.Getuid()) == nil {
		eo.Device.StateFile = filepath.Join(o.socketDir, o.name+".state")
	}
	return eo
}

// netstackMode reports whether a netstack mode was asked for.
func (o *userspaceOptions) netstackMode() bool {
	return len(o.forwards)+len(o.reverses) > 0 || o.socks5 != "" || o.httpProxy != "" || o.ping.IsValid() || o.exit.on
}

// netstackFlags reads the flags of the netstack modes.
func (o *userspaceOptions) netstackFlags(c *cli.Command) error {
	for _, s := range c.StringSlice("forward") {
		f, err := parseForward(s)
		if err != nil {
			return err
		}
		o.forwards = append(o.forwards, f)
	}
	for _, s := range c.StringSlice("reverse") {
		r, err := parseReverse(s)
		if err != nil {
			return err
		}
		o.reverses = append(o.reverses, r)
	}
	if s := c.String("socks5"); s != "" {
		o.socks5 = proxy.LoopbackDefault(s)
	}
	if s := c.String("http"); s != "" {
		o.httpProxy = proxy.LoopbackDefault(s)
	}
	auth, warn, err := proxy.AuthFromFlags(c.String("socks5-auth"), c.String("socks5-auth-file"))
	if err != nil {
		return err
	}
	if warn != "" {
		fmt.Fprintln(os.Stderr, "fips-go: warning:", warn)
	}
	o.socks5Auth = auth
	if s := c.String("ping"); s != "" {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return fmt.Errorf("--ping %q: want an IP address", s)
		}
		o.ping = a.Unmap()
	}
	o.count = int(c.Int("count"))
	o.maxConns = int(c.Int("max-conns"))
	o.idle = c.Duration("idle-timeout")
	if o.maxConns < 1 || o.idle <= 0 || o.count < 1 {
		return fmt.Errorf("--max-conns, --idle-timeout and --count must be positive")
	}
	if c.IsSet("idle-timeout") {
		o.idleExit = o.idle
	}
	x, err := exitOptionsFrom(c)
	o.exit = x
	return err
}

// runUserspace runs the netstack modes until ctx ends.
func runUserspace(ctx context.Context, o userspaceOptions) error {
	stopProfile, err := o.settings.startCPUProfile(o.name)
	if err != nil {
		return err
	}
	defer stopProfile()
	defer o.settings.writeHeapProfile(o.name, o.logf)
	nso := netstack.Options{Name: o.name}
	if o.exit.on {
		// The exit's stack forwards, and sends bulk data to many flows at
		// once: ACK thinning and timer slack are for that.
		nso.Promiscuous, nso.ACKHold, nso.TimerSlack = true, exit.ACKHold, exit.TimerSlack
	}
	tn, err := engine.StartNetstack(o.quick(), nso, o.engineOptions())
	if err != nil {
		return err
	}
	defer tn.Close()
	var sb atomic.Pointer[string]
	if o.ping.IsValid() {
		sandboxRootless(o, 0, &sb)
		return pingThrough(ctx, tn.Net, o)
	}
	mo := metrics.Options{Interface: o.name, MaxPeers: o.metrics.maxPeers}
	// The services start last; their counters are read once they run.
	var svcp atomic.Pointer[rootless.Services]
	srcs := []func() []exit.Counter{socksCounters(&svcp), netstackCounters(tn.Net)}
	if o.exit.on {
		ex, xerr := startExit(tn, o)
		if xerr != nil {
			return xerr
		}
		// Runs before tn.Close: the flows end (with RSTs) while the
		// stack can still send them.
		defer ex.Close()
		srcs = append(srcs, ex.Counters)
	}
	src := joinCounters(srcs...)
	mo.Extra = metricSamples(src)
	stopMetrics, err := startMetricsWith(o.metrics, mo, tn.Device, o.logf)
	if err != nil {
		return err
	}
	defer stopMetrics()
	h := engineHandler(tn)
	h.extra = showCounters(src)
	if o.socketDir != "" {
		l, err := listenUAPI(o, rootlessHandler{h, &sb})
		if err != nil {
			return err
		}
		defer l.Close()
	}
	user, pass, _ := strings.Cut(o.socks5Auth, ":")
	svc, err := rootless.Start(ctx, tn.Net, o.addrs, rootless.Options{
		Forwards: o.forwards, Reverses: o.reverses,
		SOCKS5: o.socks5, SOCKS5User: user, SOCKS5Password: pass, HTTP: o.httpProxy,
		DNS: o.dns, DNSSearch: o.dnsSearch, MaxConns: o.maxConns, IdleTimeout: o.idle,
		Logf: o.logf, Notef: o.notef,
	})
	if err != nil {
		return err
	}
	// On return the listeners close and their connections end before the
	// device does.
	defer svc.Close()
	svcp.Store(svc)
	// Every socket and listener of the mode exists now.
	sandboxRootless(o, 0, &sb)
	if o.ready != nil {
		o.ready(svc.Addrs())
	}
	select {
	case <-ctx.Done():
	case <-tn.Device.Done():
		return tn.Device.Err()
	}
	return nil
}

// pingThrough pings o.ping through the stack, one request a second, and
// fails when no reply came.
func pingThrough(ctx context.Context, ns *netstack.Net, o userspaceOptions) error {
	payload := make([]byte, 56)
	got := 0
	for seq := 1; seq <= o.count; seq++ {
		start := time.Now()
		// The first request also waits for the handshake.
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		rtt, err := ns.Ping(pctx, o.ping, uint16(seq), payload)
		cancel()
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			o.notef("no reply from %v, seq %d", o.ping, seq)
		} else {
			got++
			o.notef("%d bytes from %v: seq=%d time=%.3f ms", len(payload)+8, o.ping, seq, float64(rtt.Microseconds())/1000)
		}
		if seq < o.count {
			select {
			case <-time.After(time.Second - time.Since(start)):
			case <-ctx.Done():
			}
		}
	}
	o.notef("%v: %d sent, %d received", o.ping, o.count, got)
	if got == 0 {
		return fmt.Errorf("no reply from %v", o.ping)
	}
	return nil
}
