// Package cli is the fips-go command: it reads the flags and the
// environment (nowhere else in the module does) and wires the packages
// below it into the daemon, the client commands, the rootless modes and
// the self-benchmark.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/fips-go/fips-go/internal/app/userns"
	"github.com/urfave/cli/v3"
)

// version is the fips-go release; set at build time with
// -ldflags "-X github.com/fips-go/fips-go/internal/app/cli.version=...".
var version = "0.1.0-dev"

// Main runs the command line args (args[0] is the program) and returns
// the process's exit status.
func Main(args []string) int {
	if userns.IsChild() {
		userns.ChildMain() // the namespace side of `userspace -- CMD`; never returns
	}
	if err := newApp().Run(context.Background(), args); err != nil {
		var es exitStatus
		if errors.As(err, &es) {
			return int(es)
		}
		fmt.Fprintln(os.Stderr, "fips-go:", err)
		return 1
	}
	return 0
}

func newApp() *cli.Command {
	cmds := keyCommands()
	cmds = append(cmds, clientCommands()...)
	cmds = append(cmds, benchCommand(), benchPeerCommand(), userspaceCommand())
	return &cli.Command{
		Name:  "fips-go",
		Usage: "a fast userspace WireGuard, drop-in for wireguard-go",
		UsageText: "fips-go [-f] IFACE         create IFACE and run it, as wireguard-go does\n" +
			"fips-go COMMAND [args...]  keys, configuration, benchmark (see COMMANDS)",
		Description: "Run as `fips-go wg0` (or via wg-quick with WG_QUICK_USERSPACE_IMPLEMENTATION=fips-go),\n" +
			"then configure with `wg` or the built-in `fips-go set/setconf/show`.\n" +
			"Environment: LOG_LEVEL=verbose|debug|error|silent, WG_SOCKET_DIR (client commands),\n" +
			"FIPS_GO_DISABLE_GSO=1 / FIPS_GO_DISABLE_GRO=1 to turn UDP offloads off,\n" +
			"FIPS_GO_CONNECTED_SOCKETS=N to cap per-peer connected UDP sockets (0: none),\n" +
			"FIPS_GO_METRICS=ADDR and FIPS_GO_METRICS_MAX_PEERS=N as --metrics and --metrics-max-peers (for wg-quick),\n" +
			"FIPS_GO_CPUPROFILE=PATH / FIPS_GO_MEMPROFILE=PATH for debugging: profiles written to PATH.IFACE on exit.\n" +
			"A value that does not parse is an error.",
		Version: version,
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "foreground", Aliases: []string{"f"}, Usage: "stay in the foreground instead of daemonizing"},
		}, metricsFlags()...),
		Commands: cmds,
		Action: func(ctx context.Context, c *cli.Command) error {
			if c.Args().Len() != 1 {
				return cli.ShowAppHelp(c)
			}
			if c.Args().Len() > 1 {
				return fmt.Errorf("want one interface name, got %d arguments", c.Args().Len())
			}
			return runInterface(ctx, c, c.Args().First())
		},
	}
}
