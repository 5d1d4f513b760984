package cli

import (
	"bytes"
	"context"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/internal/app/showfmt"
	"github.com/fips-go/fips-go/ipc"
	"github.com/urfave/cli/v3"
)

// clearScreen moves the cursor home and clears the terminal.
const clearScreen = "\x1b[H\x1b[2J"

// watch is `fips-go show IFACE --watch`: a frame of per-peer rates every
// interval until Ctrl-C (or --count frames). On a terminal each frame
// replaces the last; into a file or pipe frames follow each other,
// separated by a blank line.
func watch(ctx context.Context, c *cli.Command, iface string) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	w := c.Root().Writer
	live := isTerminal(w)
	interval := c.Duration("interval")
	if interval <= 0 {
		return fmt.Errorf("show --watch: --interval must be positive")
	}
	cl, err := dial(iface)
	if err != nil {
		return err
	}
	defer cl.Close()
	var prev device.Status
	var prevAt time.Time
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for n := 1; ; n++ {
		cur, err := statusWithCounters(cl)
		if err != nil {
			return err
		}
		at := time.Now()
		var frame bytes.Buffer
		if live {
			frame.WriteString(clearScreen)
		} else if n > 1 {
			frame.WriteString("\n")
		}
		var dt time.Duration
		if !prevAt.IsZero() {
			dt = at.Sub(prevAt)
		}
		showfmt.FormatWatch(&frame, iface, prev, cur, dt, at, showfmt.WatchOptions{})
		if _, err := w.Write(frame.Bytes()); err != nil {
			return err
		}
		if count := int(c.Int("count")); count > 0 && n >= count {
			return nil
		}
		prev, prevAt = cur, at
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// statusWithCounters is one sample over an open connection; a wireguard-go
// daemon has no counters, so its drops show as none.
func statusWithCounters(cl *ipc.Client) (device.Status, error) {
	st, err := cl.Get()
	if err != nil {
		return st, err
	}
	if ctrs, err := cl.Counters(); err == nil {
		st.Counters = ctrs
	}
	return st, nil
}
