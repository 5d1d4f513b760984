package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/app/showfmt"
	"github.com/fips-go/fips-go/ipc"
	"github.com/urfave/cli/v3"
)

// cmdShow is `wg show` with fips-go's counters added to the pretty form.
// The single-field forms and dump print exactly what wg prints, so scripts
// written for wg work unchanged.
func cmdShow(ctx context.Context, c *cli.Command) error {
	args := c.Args().Slice()
	if len(args) > 2 {
		return errors.New("show: too many arguments")
	}
	target, field := "all", ""
	if len(args) > 0 {
		target = args[0]
	}
	if len(args) > 1 {
		field = args[1]
		if !slices.Contains(showfmt.ShowFields, field) {
			return fmt.Errorf("show: invalid parameter %q (want one of %s)", field, strings.Join(showfmt.ShowFields, ", "))
		}
	}
	w := c.Root().Writer
	if target == "interfaces" {
		if field != "" {
			return errors.New("show interfaces: takes no field")
		}
		names, err := ipc.Interfaces(socketDir())
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, strings.Join(names, " "))
		return err
	}
	if c.Bool("watch") {
		if field != "" || target == "all" {
			return errors.New("show --watch: want one IFACE and no field")
		}
		return watch(ctx, c, target)
	}
	all := target == "all"
	names := []string{target}
	if all {
		var err error
		if names, err = ipc.Interfaces(socketDir()); err != nil {
			return err
		}
	}
	opts := showfmt.ShowOptions{Now: time.Now(), Counters: c.Bool("counters") && field == "", ShowKeys: c.Bool("show-keys")}
	for i, name := range names {
		st, epNames, sandbox, err := getStatus(name, opts.Counters, field == "")
		opts.EndpointNames = epNames
		// With the counters, as fips-go's own: --counters=false prints
		// what wg prints.
		opts.Sandbox = ""
		if opts.Counters {
			opts.Sandbox = sandbox
		}
		if err != nil {
			if !all {
				return err
			}
			// As wg does: one interface that went away does not hide the others.
			fmt.Fprintf(c.Root().ErrWriter, "%v\n", err)
			continue
		}
		if field != "" {
			prefix := ""
			if all {
				prefix = name
			}
			err = showfmt.FormatField(w, prefix, st, field)
		} else {
			if i > 0 {
				fmt.Fprintln(w)
			}
			err = showfmt.FormatShow(w, name, st, opts)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// getStatus reads an interface's status and, if asked, fips-go's counters
// and peers' path MTUs;
// for the pretty form (pretty) also the endpoint names it follows and its
// sandbox (a wireguard-go daemon knows none of these requests; it then has
// none).
func getStatus(name string, counters, pretty bool) (device.Status, map[noise.PublicKey]string, string, error) {
	var st device.Status
	var names map[noise.PublicKey]string
	var sandbox string
	err := withClient(name, func(cl *ipc.Client) error {
		var err error
		if st, err = cl.Get(); err != nil {
			return err
		}
		if counters {
			_ = cl.AddFips(&st) // wireguard-go: none
		}
		if pretty {
			names, _ = cl.EndpointNames()
			sandbox, _ = cl.Sandbox()
		}
		return nil
	})
	return st, names, sandbox, err
}
