package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/dnsfollow"
	"github.com/fips-go/fips-go/ipc"
	"github.com/fips-go/fips-go/tun/netstack"
	"github.com/urfave/cli/v3"
)

// The rootless mode: the tunnel's far side is reached through a userspace
// TCP/IP stack instead of a kernel TUN, and local TCP ports are forwarded
// into it. No root, no capabilities, no /dev/net/tun.

func userspaceCommand() *cli.Command {
	return &cli.Command{
		Name:  "userspace",
		Usage: "run a tunnel without root: a userspace TCP/IP stack, with local ports forwarded into the tunnel",
		Description: "Example: reach 10.0.0.1:80 inside the tunnel at 127.0.0.1:8080 on this machine:\n" +
			"  fips-go userspace --config wg0.conf --address 10.0.0.2/24 --forward 127.0.0.1:8080=10.0.0.1:80\n" +
			"The config file is wg(8)'s format ([Interface] PrivateKey, ListenPort; [Peer] ...).\n" +
			"A UAPI socket is served in --socket-dir, so `WG_SOCKET_DIR=DIR fips-go show NAME` works.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Required: true, Usage: "wg config file"},
			&cli.StringSliceFlag{Name: "address", Aliases: []string{"a"}, Required: true, Usage: "this side's tunnel address, e.g. 10.0.0.2/24 (repeatable)"},
			&cli.StringSliceFlag{Name: "forward", Aliases: []string{"L"}, Usage: "LOCAL=REMOTE: accept TCP on LOCAL (host:port) and connect to REMOTE inside the tunnel (repeatable)"},
			&cli.IntFlag{Name: "mtu", Value: 1420, Usage: "tunnel MTU"},
			&cli.StringFlag{Name: "name", Value: "fipsgo0", Usage: "interface name for the UAPI socket"},
			&cli.StringFlag{Name: "socket-dir", Usage: "where to put the UAPI socket (default $XDG_RUNTIME_DIR/fips-go or /tmp/fips-go-UID; \"none\" for no socket)"},
		}, metricsFlags()...),
		Action: func(ctx context.Context, c *cli.Command) error {
			opts, err := userspaceOptionsFrom(c)
			if err != nil {
				return fmt.Errorf("userspace: %w", err)
			}
			if r, ok := ctx.Value(readyKey{}).(func([]net.Addr)); ok {
				opts.ready = r
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

type forward struct {
	local  string
	remote netip.AddrPort
}

type userspaceOptions struct {
	cfg       *device.Config
	names     map[noise.PublicKey]string // peers whose Endpoint is a host name
	addrs     []netip.Addr
	forwards  []forward
	mtu       int
	name      string
	socketDir string // "" for none
	logf      func(string, ...any)
	metrics   metricsConfig
	ready     func(locals []net.Addr) // called once listening (tests)
}

func userspaceOptionsFrom(c *cli.Command) (userspaceOptions, error) {
	o := userspaceOptions{mtu: int(c.Int("mtu")), name: c.String("name"), metrics: metricsConfigFrom(c)}
	f, err := os.Open(c.String("config"))
	if err != nil {
		return o, err
	}
	defer f.Close()
	if o.cfg, o.names, err = ipc.ParseConfigFileNames(f, c.String("config"), resolveHost); err != nil {
		return o, err
	}
	for _, s := range c.StringSlice("address") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return o, fmt.Errorf("--address %q: want an address like 10.0.0.2/24", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		o.addrs = append(o.addrs, p.Addr())
	}
	for _, s := range c.StringSlice("forward") {
		local, remote, ok := strings.Cut(s, "=")
		ap, err := netip.ParseAddrPort(remote)
		if !ok || err != nil {
			return o, fmt.Errorf("--forward %q: want LOCAL=REMOTE, e.g. 127.0.0.1:8080=10.0.0.1:80", s)
		}
		o.forwards = append(o.forwards, forward{local: local, remote: ap})
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
	o.logf, _ = loggers("fips-go(userspace): ")
	return o, nil
}

// runUserspace runs the device until ctx ends.
func runUserspace(ctx context.Context, o userspaceOptions) error {
	ns, err := netstack.New(netstack.Options{Addresses: o.addrs, MTU: o.mtu, Name: o.name})
	if err != nil {
		return err
	}
	var port uint16
	if o.cfg.ListenPort != nil {
		port = *o.cfg.ListenPort
	}
	dev, err := device.New(ns, conn.NewDefault(conn.Options{}), device.Options{ListenPort: port, Logf: o.logf})
	if err != nil {
		ns.Close()
		return err
	}
	defer dev.Close()
	if err := dev.Apply(o.cfg); err != nil {
		return err
	}
	stopMetrics, err := startMetrics(o.metrics, o.name, dev, o.logf)
	if err != nil {
		return err
	}
	defer stopMetrics()
	// Endpoints given as host names follow the name when handshakes fail;
	// `fips-go setconf` through the socket may change the names.
	names := dnsfollow.NewTable()
	if err := names.Set(o.names, true); err != nil {
		return err
	}
	stopFollow := followNames(dev, names, o.logf)
	defer stopFollow()
	var wg sync.WaitGroup
	defer wg.Wait()
	if o.socketDir != "" {
		if err := privateSocketDir(o.socketDir, os.Getuid()); err != nil {
			return err
		}
		l, err := ipc.Listen(o.socketDir, o.name)
		if err != nil {
			return err
		}
		defer l.Close()
		go l.Serve(namedDevice{dev, names}, ipc.ServeOptions{Logf: o.logf})
	}
	var locals []net.Addr
	for _, f := range o.forwards {
		ln, err := net.Listen("tcp", f.local)
		if err != nil {
			return fmt.Errorf("--forward %s: %w", f.local, err)
		}
		defer ln.Close()
		locals = append(locals, ln.Addr())
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveForward(ctx, ln, ns, f.remote, o.logf)
		}()
	}
	if o.ready != nil {
		o.ready(locals)
	}
	select {
	case <-ctx.Done():
	case <-dev.Done():
		return dev.Err()
	}
	return nil
}

// serveForward accepts local connections and splices each to a connection
// to remote inside the tunnel.
func serveForward(ctx context.Context, ln net.Listener, ns *netstack.Net, remote netip.AddrPort, logf func(string, ...any)) {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			r, err := ns.DialTCPAddrPort(ctx, remote)
			if err != nil {
				logf("forward to %v: %v", remote, err)
				return
			}
			defer r.Close()
			splice(c, r)
		}()
	}
}

// splice copies both ways until both directions are done, passing each
// side's end of stream on as a half-close.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
}
