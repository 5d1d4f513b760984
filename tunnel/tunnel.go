package tunnel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/internal/engine"
	"github.com/fips-go/fips-go/internal/engine/dnsclient"
	"github.com/fips-go/fips-go/ipc"
	"github.com/fips-go/fips-go/tun/netstack"
)

// Config is a parsed wg-quick(8) file: the device's configuration plus the
// [Interface] keys Address, DNS and MTU. It is the type
// ipc.ParseQuickConfigFile returns, so a program may build one in code.
type Config = ipc.QuickConfig

// Errors callers may branch on (with errors.Is).
var (
	// ErrNoDNS: a host name was given, but the configuration names no DNS
	// server to resolve it with inside the tunnel.
	ErrNoDNS = errors.New("tunnel: no DNS server configured (add DNS = <address> to [Interface], or the name to Options.Hosts)")
	// ErrNoAddress: the configuration gives the tunnel no address.
	ErrNoAddress = errors.New("tunnel: no Address in [Interface]")
	// ErrNoPeers: WaitHandshake was called on a tunnel without peers.
	ErrNoPeers = errors.New("tunnel: no peers configured")
)

// Options tune a tunnel. The zero value works.
type Options struct {
	// Logf receives operational messages, never one per packet; if nil,
	// Logger receives them at level Info; if both are nil they are
	// discarded. gVisor's own log lines go there too (see Open).
	Logf   func(format string, args ...any)
	Logger *slog.Logger
	// Netstack tunes the userspace TCP/IP stack (buffers, congestion
	// control, queue). Its Addresses and MTU come from the Config, and
	// its Logf from the fields above.
	Netstack netstack.Options
	// Device and Bind are passed to device.New and conn.NewDefault; the
	// zero values are the daemon's defaults.
	Device device.Options
	Bind   conn.Options
	// OnEvent, if set, is told of peer events: handshakes completed,
	// sessions expired, endpoints changed. Events are delivered in order,
	// one call at a time, on a goroutine of the tunnel's; the device never
	// waits for OnEvent: when it falls 64 events behind, the oldest are
	// dropped and the next Event says how many (Dropped). OnEvent must not
	// call Close; it is not called once Close has returned.
	OnEvent func(Event)
	// Capture, if set, receives the tunnel's inner packets, both ways, in
	// the pcap format that tcpdump -r and Wireshark read (link type RAW:
	// bare IP packets). Packets are written as they pass, so a slow
	// writer slows the tunnel; the file grows with the traffic. Open
	// does not close it; write it to a file and close that after Close.
	Capture io.Writer
	// NoFollow turns off following endpoints given as host names.
	NoFollow bool
	// ResolveEndpoint looks up endpoint host names, outside the tunnel,
	// when parsing a file and when following them (nil: the system
	// resolver, 10 s per lookup).
	ResolveEndpoint func(ctx context.Context, host string) ([]netip.Addr, error)
	// Hosts are names the tunnel knows without DNS (ASCII case and a
	// trailing dot ignored), answered before the configuration's DNS
	// servers are asked, also when it names none. A name here is never
	// asked of a server, even for a family it has no address of.
	Hosts map[string][]netip.Addr
}

func (o *Options) logf() func(string, ...any) {
	switch {
	case o.Logf != nil:
		return o.Logf
	case o.Logger != nil:
		l := o.Logger
		return func(format string, args ...any) { l.Info(fmt.Sprintf(format, args...)) }
	}
	return func(string, ...any) {}
}

func (o *Options) resolveEndpoint() func(ctx context.Context, host string) ([]netip.Addr, error) {
	if o.ResolveEndpoint != nil {
		return o.ResolveEndpoint
	}
	return func(ctx context.Context, host string) ([]netip.Addr, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}
}

// Tunnel is a running WireGuard device on a userspace TCP/IP stack. Its
// methods are safe for concurrent use.
type Tunnel struct {
	net       *netstack.Net
	dev       *device.Device
	addrs     []netip.Addr // the stack's own addresses
	search    []string     // the search domains of the configuration's DNS
	resolver  *dnsclient.Resolver
	transport *http.Transport
	logf      func(string, ...any)
	pingSeq   atomic.Uint32
	events    *events

	eng       *engine.Engine
	closeOnce sync.Once
}

// Parse parses the text of a wg-quick(8) file, resolving endpoint host
// names with the system resolver.
func Parse(text []byte) (*Config, error) {
	var o Options
	return parse(context.Background(), bytes.NewReader(text), "config", &o)
}

func parse(ctx context.Context, r io.Reader, name string, o *Options) (*Config, error) {
	resolve := o.resolveEndpoint()
	return ipc.ParseQuickConfigFile(r, name, func(host string) ([]netip.Addr, error) {
		return resolve(ctx, host)
	})
}

// OpenFile opens a tunnel from a wg-quick(8) file.
func OpenFile(ctx context.Context, path string, opts Options) (*Tunnel, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cfg, err := parse(ctx, f, path, &opts)
	if err != nil {
		return nil, err
	}
	return open(ctx, cfg, opts, path)
}

// OpenBytes opens a tunnel from the text of a wg-quick(8) file.
func OpenBytes(ctx context.Context, text []byte, opts Options) (*Tunnel, error) {
	cfg, err := parse(ctx, bytes.NewReader(text), "config", &opts)
	if err != nil {
		return nil, err
	}
	return Open(ctx, cfg, opts)
}

// Open starts a tunnel from cfg: a userspace stack with cfg's addresses,
// a device on it with cfg's keys and peers, and a UDP socket on
// opts.Device.ListenPort if set, else on cfg's ListenPort, else on one the
// system picks (an error matching device.ErrPortInUse when it cannot be
// had). ctx bounds the start only; the tunnel runs until Close. Wg-quick's
// hooks and Table mean nothing here: they are ignored, with a log line
// that says so.
//
// gVisor logs through one process-wide target; the first Open takes it
// over, and from then on its lines go to the Logf or Logger of every open
// tunnel (to none when no tunnel is open).
func Open(ctx context.Context, cfg *Config, opts Options) (*Tunnel, error) {
	return open(ctx, cfg, opts, "config")
}

// open is Open with the configuration's source named in messages.
func open(ctx context.Context, cfg *Config, opts Options, source string) (*Tunnel, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg == nil || cfg.Config == nil {
		return nil, errors.New("tunnel: no configuration")
	}
	if len(cfg.Addresses) == 0 {
		return nil, ErrNoAddress
	}
	logf := opts.logf()
	t := &Tunnel{search: cfg.DNSSearch, logf: logf}
	for _, p := range cfg.Addresses {
		t.addrs = append(t.addrs, p.Addr().Unmap())
	}
	t.events = newEvents(opts.OnEvent)
	eng, err := engine.StartNetstack(cfg, opts.Netstack, engine.Options{
		Logf: logf, Source: source, Device: t.deviceOptions(&opts), Bind: opts.Bind,
		NoFollow: opts.NoFollow, Resolve: opts.resolveEndpoint(), Capture: opts.Capture,
	})
	if err != nil {
		t.events.close()
		return nil, err
	}
	t.eng, t.net, t.dev = eng, eng.Net, eng.Device
	t.resolver = t.newResolver(cfg.DNS, opts.Hosts)
	t.transport = &http.Transport{
		DialContext:           t.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return t, nil
}

// deviceOptions are o.Device with the tunnel's event queue added.
func (t *Tunnel) deviceOptions(o *Options) device.Options {
	dopts := o.Device
	if theirs := dopts.OnPeerEvent; theirs != nil {
		dopts.OnPeerEvent = func(e device.PeerEvent) {
			theirs(e)
			t.events.push(e)
		}
	} else {
		dopts.OnPeerEvent = t.events.push
	}
	return dopts
}

// Close ends the tunnel: its connections are reset, its goroutines exit
// and its socket closes. Closing twice is not an error.
func (t *Tunnel) Close() error {
	t.closeOnce.Do(func() {
		t.transport.CloseIdleConnections()
		t.eng.Close()
		t.events.close()
	})
	return nil
}

// Done is closed when the tunnel stops, by Close or because its device
// failed (then Err says why).
func (t *Tunnel) Done() <-chan struct{} { return t.dev.Done() }

// Err is why the tunnel stopped, once Done is closed.
func (t *Tunnel) Err() error { return t.dev.Err() }

// Addresses are the tunnel's own addresses.
func (t *Tunnel) Addresses() []netip.Addr { return append([]netip.Addr(nil), t.addrs...) }

// Status is a snapshot of the device: keys, listen port, and per peer its
// endpoint, last handshake and traffic.
func (t *Tunnel) Status() device.Status { return t.dev.Status() }

// Apply changes the device's configuration at run time, atomically. On a
// closed tunnel it fails with an error matching net.ErrClosed (and
// device.ErrClosed).
func (t *Tunnel) Apply(cfg *device.Config) error {
	err := t.eng.Apply(cfg)
	if errors.Is(err, device.ErrClosed) {
		return fmt.Errorf("tunnel: apply: %w", &closedError{cause: err})
	}
	return err
}

// Ping sends one ICMP echo request to dst through the tunnel and waits
// until ctx ends for the reply, returning the round-trip time. An address
// no peer routes fails at once with ErrNoRoute.
func (t *Tunnel) Ping(ctx context.Context, dst netip.Addr) (time.Duration, error) {
	return t.ping(ctx, dst)
}
