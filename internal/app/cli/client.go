package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/ipc"
	"github.com/urfave/cli/v3"
)

// The built-in wg(8)-style client: it talks to any UAPI socket, fips-go's or
// wireguard-go's, so machines without wireguard-tools can still configure
// an interface.

func socketDir() string {
	if d := os.Getenv("WG_SOCKET_DIR"); d != "" {
		return d
	}
	return ipc.DefaultSocketDir
}

func resolveHost(host string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

func dial(iface string) (*ipc.Client, error) {
	c, err := ipc.Dial(socketDir(), iface)
	if err != nil {
		return nil, fmt.Errorf("unable to access interface %s: %w", iface, err)
	}
	return c, nil
}

func withClient(iface string, fn func(*ipc.Client) error) error {
	c, err := dial(iface)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}

func clientCommands() []*cli.Command {
	return []*cli.Command{
		{
			Name:      "show",
			Usage:     "show interfaces, peers and fips-go's counters (like wg show)",
			ArgsUsage: "[IFACE | all | interfaces] [public-key | private-key | listen-port | fwmark | peers | preshared-keys | endpoints | allowed-ips | latest-handshakes | transfer | persistent-keepalive | dump]",
			Flags: []cli.Flag{
				&cli.BoolFlag{Name: "counters", Value: true, Usage: "also print fips-go's drop and handshake counters"},
				&cli.BoolFlag{Name: "show-keys", Usage: "print private and preshared keys instead of (hidden)"},
				&cli.BoolFlag{Name: "watch", Usage: "refresh every --interval with per-peer rates (Mbit/s) and drops/s, like top"},
				&cli.DurationFlag{Name: "interval", Value: time.Second, Usage: "refresh interval for --watch"},
				&cli.IntFlag{Name: "count", Usage: "with --watch, stop after this many frames (0: until Ctrl-C)"},
			},
			Action: cmdShow,
		},
		{
			Name:      "showconf",
			Usage:     "print the interface's configuration in wg config-file format",
			ArgsUsage: "IFACE",
			Action: func(ctx context.Context, c *cli.Command) error {
				iface, err := oneArg(c, "IFACE")
				if err != nil {
					return err
				}
				return withClient(iface, func(cl *ipc.Client) error {
					st, err := cl.Get()
					if err != nil {
						return err
					}
					_, err = io.WriteString(c.Root().Writer, ipc.FormatConfig(st))
					return err
				})
			},
		},
		{
			Name:      "set",
			Usage:     "change an interface, with wg set's arguments",
			ArgsUsage: "IFACE [listen-port P] [fwmark M] [private-key FILE] [peer KEY [remove] [preshared-key FILE] [endpoint H:P] [persistent-keepalive N|off] [allowed-ips A/B,...]]...",
			Action: func(ctx context.Context, c *cli.Command) error {
				args := c.Args().Slice()
				if len(args) < 1 {
					return errors.New("set: missing IFACE")
				}
				cfg, err := ipc.ParseSetArgs(args[1:], resolveHost, os.ReadFile)
				if err != nil {
					return fmt.Errorf("set: %w", err)
				}
				return withClient(args[0], func(cl *ipc.Client) error { return cl.Set(cfg) })
			},
		},
		confCommand("setconf", "replace the interface's configuration with a config file", ipc.ParseConfigFile, true),
		confCommand("addconf", "add the peers and settings of a config file to the interface", ipc.ParseAddConfigFile, false),
		{
			Name:      "syncconf",
			Usage:     "make the interface match a config file, disturbing unchanged peers as little as possible",
			ArgsUsage: "IFACE FILE",
			Action: func(ctx context.Context, c *cli.Command) error {
				iface, want, names, err := readConf(c, ipc.ParseConfigFile)
				if err != nil {
					return err
				}
				return withClient(iface, func(cl *ipc.Client) error {
					cur, err := cl.Get()
					if err != nil {
						return err
					}
					if err := cl.Set(ipc.SyncConfig(cur, want)); err != nil {
						return err
					}
					sendNames(cl, names, true, c.Root().ErrWriter)
					return nil
				})
			},
		},
	}
}

// confParser parses a config file, returning the peers whose Endpoint is a
// host name with that name.
type confParser func(r io.Reader, name string, resolve ipc.Resolver) (*device.Config, map[noise.PublicKey]string, error)

func readConf(c *cli.Command, parse confParser) (string, *device.Config, map[noise.PublicKey]string, error) {
	args := c.Args().Slice()
	if len(args) != 2 {
		return "", nil, nil, fmt.Errorf("%s: want IFACE FILE", c.Name)
	}
	f, err := os.Open(args[1])
	if err != nil {
		return "", nil, nil, fmt.Errorf("%s: %w", c.Name, err)
	}
	defer f.Close()
	cfg, names, err := parse(f, args[1], resolveHost)
	if err != nil {
		return "", nil, nil, err
	}
	return args[0], cfg, names, nil
}

// confCommand is setconf or addconf; replace says whether the file's
// endpoint names replace those the daemon follows.
func confCommand(name, usage string, parse confParser, replace bool) *cli.Command {
	return &cli.Command{
		Name:      name,
		Usage:     usage,
		ArgsUsage: "IFACE FILE",
		Action: func(ctx context.Context, c *cli.Command) error {
			iface, cfg, names, err := readConf(c, parse)
			if err != nil {
				return err
			}
			return withClient(iface, func(cl *ipc.Client) error {
				if err := cl.Set(cfg); err != nil {
					return err
				}
				sendNames(cl, names, replace, c.Root().ErrWriter)
				return nil
			})
		},
	}
}

func oneArg(c *cli.Command, what string) (string, error) {
	if c.Args().Len() != 1 {
		return "", fmt.Errorf("%s: want %s", c.Name, what)
	}
	return c.Args().First(), nil
}
