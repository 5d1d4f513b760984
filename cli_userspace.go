package main

import (
	"cmp"
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
	"github.com/fips-go/fips-go/ipc"
	"github.com/fips-go/fips-go/tun/netstack"
	"github.com/urfave/cli/v3"
)

// The rootless mode: the tunnel's far side is reached through a userspace
// TCP/IP stack instead of a kernel TUN, and local TCP ports are forwarded
// into it. No root, no capabilities, no /dev/net/tun.

func userspaceCommand() *cli.Command {
	return &cli.Command{
		Name:      "userspace",
		Usage:     "run a tunnel without root: a command in its own network namespace, or a userspace TCP/IP stack with proxies and port forwards",
		ArgsUsage: "[-- CMD [ARGS...]]",
		Description: "Example: run curl through the tunnel, in a user and network namespace of its own:\n" +
			"  fips-go userspace -c wg0.conf -- curl http://10.0.0.1/\n" +
			"Example: reach 10.0.0.1:80 inside the tunnel at 127.0.0.1:8080 on this machine:\n" +
			"  fips-go userspace --config wg0.conf --forward 127.0.0.1:8080=10.0.0.1:80\n" +
			"The config file is wg-quick(8)'s format: [Interface] PrivateKey, Address, DNS, MTU, ListenPort; [Peer] ...\n" +
			"A UAPI socket is served in --socket-dir, so `WG_SOCKET_DIR=DIR fips-go show NAME` works.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Required: true, Usage: "wg-quick config file ([Interface] Address, DNS, MTU, ListenPort are used; flags override them)"},
			&cli.StringSliceFlag{Name: "address", Aliases: []string{"a"}, Usage: "this side's tunnel address, e.g. 10.0.0.2/24 (repeatable; default: the file's Address)"},
			&cli.StringSliceFlag{Name: "dns", Usage: "name server inside the tunnel (repeatable; default: the file's DNS)"},
			&cli.StringSliceFlag{Name: "forward", Aliases: []string{"L"}, Usage: "LOCAL=REMOTE: accept TCP on LOCAL (host:port) and connect to REMOTE inside the tunnel (repeatable)"},
			&cli.IntFlag{Name: "mtu", Usage: "tunnel MTU (default: the file's MTU, else 1420)"},
			&cli.IntFlag{Name: "listen-port", Value: -1, Usage: "UDP port (default: the file's ListenPort, else any)"},
			&cli.StringFlag{Name: "name", Value: "fipsgo0", Usage: "interface name for the UAPI socket"},
			&cli.StringFlag{Name: "socket-dir", Usage: "where to put the UAPI socket (default $XDG_RUNTIME_DIR/fips-go or /tmp/fips-go-UID; \"none\" for no socket)"},
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			opts, err := userspaceOptionsFrom(c)
			if err != nil {
				return fmt.Errorf("userspace: %w", err)
			}
			if r, ok := ctx.Value(readyKey{}).(func([]net.Addr)); ok {
				opts.ready = r
			}
			if c.Args().Len() > 0 {
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

type forward struct {
	local  string
	remote netip.AddrPort
}

type userspaceOptions struct {
	cfg       *device.Config
	prefixes  []netip.Prefix // the tunnel addresses with their subnets
	addrs     []netip.Addr
	dns       []netip.Addr
	dnsSearch []string
	forwards  []forward
	mtu       int
	name      string
	socketDir string // "" for none
	logf      func(string, ...any)
	ready     func(locals []net.Addr) // called once listening (tests)
}

func userspaceOptionsFrom(c *cli.Command) (userspaceOptions, error) {
	o := userspaceOptions{name: c.String("name")}
	o.logf, _ = loggers("fips-go(userspace): ")
	f, err := os.Open(c.String("config"))
	if err != nil {
		return o, err
	}
	defer f.Close()
	q, err := ipc.ParseQuickConfigFile(f, c.String("config"), resolveHost)
	if err != nil {
		return o, err
	}
	if len(q.Ignored) > 0 {
		o.logf("%s: ignoring %s (wg-quick hooks and routing tables need root)", c.String("config"), strings.Join(q.Ignored, ", "))
	}
	o.cfg = q.Config
	if err := o.applyFile(q, c); err != nil {
		return o, err
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
	if o.socketDir != "" {
		if err := privateSocketDir(o.socketDir, os.Getuid()); err != nil {
			return err
		}
		l, err := ipc.Listen(o.socketDir, o.name)
		if err != nil {
			return err
		}
		defer l.Close()
		go l.Serve(dev, ipc.ServeOptions{Logf: o.logf})
	}
	var wg sync.WaitGroup
	defer wg.Wait()
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
