package cli

import (
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/fips-go/fips-go/internal/app/metrics"
	"github.com/urfave/cli/v3"
)

// The metrics endpoint's command line. The daemonizing parent binds the
// address itself and hands the socket to the child (as it does the TUN and
// the UAPI socket), so a taken port fails `fips-go wg0` with a clear error
// instead of a daemon that dies unseen.
const (
	envMetrics         = "FIPS_GO_METRICS"
	envMetricsMaxPeers = "FIPS_GO_METRICS_MAX_PEERS"
	envMetricsFD       = "FIPS_GO_METRICS_FD"
)

func metricsFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "metrics", Sources: cli.EnvVars(envMetrics),
			Usage: "serve Prometheus metrics on http://ADDR/metrics; a bare port (:9586) means 127.0.0.1", Value: ""},
		&cli.IntFlag{Name: "metrics-max-peers", Sources: cli.EnvVars(envMetricsMaxPeers),
			Usage: "leave per-peer series out above this many peers (negative: always)", Value: metrics.DefaultMaxPeers},
	}
}

// metricsConfig is what the device's owner needs to start the endpoint.
type metricsConfig struct {
	addr     string           // "" for none
	maxPeers int              // as metrics.Options.MaxPeers
	ln       *net.TCPListener // already bound (daemon child), or nil
	// announce, when set, says where the metrics are served (a foreground
	// mode, where --metrics 127.0.0.1:0 must tell the port); else logf.
	announce func(string, ...any)
}

func metricsConfigFrom(c *cli.Command) metricsConfig {
	return metricsConfig{addr: c.String("metrics"), maxPeers: int(c.Int("metrics-max-peers"))}
}

// inheritedMetricsListener is the socket a daemonizing parent passed on.
func inheritedMetricsListener() (*net.TCPListener, error) {
	v := os.Getenv(envMetricsFD)
	if v == "" {
		return nil, nil
	}
	fd, err := strconv.Atoi(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envMetricsFD, err)
	}
	f := os.NewFile(uintptr(fd), "metrics")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("metrics socket from fd %d: %w", fd, err)
	}
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		ln.Close()
		return nil, fmt.Errorf("metrics socket from fd %d is not TCP", fd)
	}
	return tl, nil
}

// startMetrics serves src's metrics if an address was given; the returned
// stop is never nil.
func startMetrics(mc metricsConfig, iface string, src metrics.Source, logf func(string, ...any)) (stop func(), err error) {
	return startMetricsWith(mc, metrics.Options{Interface: iface, MaxPeers: mc.maxPeers}, src, logf)
}

// startMetricsWith is startMetrics with the collector's options given.
func startMetricsWith(mc metricsConfig, mo metrics.Options, src metrics.Source, logf func(string, ...any)) (stop func(), err error) {
	if mc.addr == "" && mc.ln == nil {
		return func() {}, nil
	}
	h := metrics.NewHandler(metrics.NewCollector(src, mo))
	ln := mc.ln
	if ln == nil {
		if ln, err = metrics.ListenTCP(mc.addr); err != nil {
			return nil, err
		}
	}
	s := metrics.Serve(ln, h, logf)
	say := logf
	if mc.announce != nil {
		say = mc.announce
	}
	say("metrics on http://%s/metrics", s.Addr())
	return func() { s.Close() }, nil
}
