package cli

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/aqm"
	"github.com/fips-go/fips-go/dnsfollow"
	"github.com/fips-go/fips-go/internal/chachapoly"
	"github.com/fips-go/fips-go/internal/procs"
	"github.com/fips-go/fips-go/internal/schedslice"
	"github.com/fips-go/fips-go/ipc"
	"github.com/fips-go/fips-go/metrics"
	"github.com/fips-go/fips-go/tun"
	"github.com/urfave/cli/v3"
)

// The wireguard-go daemon contract: the parent creates the TUN and the UAPI
// socket, re-executes itself with them on fds 3 and 4, and exits 0 once the
// child answers on the socket.
const (
	envTunFD      = "WG_TUN_FD"
	envUAPIFD     = "WG_UAPI_FD"
	envForeground = "WG_PROCESS_FOREGROUND"
	envLogLevel   = "LOG_LEVEL"
	defaultMTU    = 1420
	readyTimeout  = 15 * time.Second
)

// logLevel maps LOG_LEVEL to (verbose logger, error logger).
func loggers(prefix string) (logf, errf func(string, ...any)) {
	discard := func(string, ...any) {}
	l := log.New(os.Stderr, prefix, log.LstdFlags)
	switch os.Getenv(envLogLevel) {
	case "verbose", "debug":
		return l.Printf, l.Printf
	case "silent":
		return discard, discard
	default: // "error" and unset
		return discard, l.Printf
	}
}

// runInterface is `fips-go [-f] IFACE`.
func runInterface(ctx context.Context, c *cli.Command, iface string) error {
	foreground := c.Bool("foreground") || os.Getenv(envForeground) == "1"
	mc := metricsConfigFrom(c)
	if os.Getenv(envForeground) == "1" && os.Getenv(envTunFD) != "" {
		return runDaemonChild(iface, mc)
	}
	if !foreground {
		return daemonize(iface, mc)
	}
	t, name, l, err := createInterface(iface)
	if err != nil {
		return err
	}
	return serve(name, t, l, mc)
}

// createInterface creates the TUN and, under the name the kernel gave it,
// the UAPI socket; on error nothing is left behind.
func createInterface(iface string) (tun.Device, string, *ipc.Listener, error) {
	t, err := tun.Create(iface, defaultMTU)
	if err != nil {
		return nil, "", nil, fmt.Errorf("creating TUN %q: %w", iface, err)
	}
	name, err := t.Name()
	if err != nil {
		t.Close()
		return nil, "", nil, fmt.Errorf("reading TUN name: %w", err)
	}
	l, err := ipc.Listen(ipc.DefaultSocketDir, name)
	if err != nil {
		t.Close()
		return nil, "", nil, err
	}
	return t, name, l, nil
}

// daemonize creates the TUN and socket, starts the child on them, and waits
// until the child answers a get request, so that a script may use the
// interface the moment this returns.
func daemonize(iface string, mc metricsConfig) error {
	var mf *os.File
	if mc.addr != "" {
		ln, err := metrics.ListenTCP(mc.addr)
		if err != nil {
			return err
		}
		if mf, err = ln.File(); err != nil {
			ln.Close()
			return fmt.Errorf("metrics socket: %w", err)
		}
		ln.Close()
		defer mf.Close()
	}
	t, name, l, err := createInterface(iface)
	if err != nil {
		return err
	}
	// The child holds its own descriptor for the TUN; ours goes when we exit.
	defer t.Close()
	self, err := os.Executable()
	if err != nil {
		l.Close()
		return fmt.Errorf("finding own executable: %w", err)
	}
	path := l.Path()
	// The child owns the socket from here on; if it never gets going, the
	// file is ours to clean up.
	uf, err := l.Detach()
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("UAPI socket: %w", err)
	}
	defer uf.Close()
	cmd := exec.Command(self, name)
	cmd.Env = append(os.Environ(), envTunFD+"=3", envUAPIFD+"=4", envForeground+"=1")
	cmd.ExtraFiles = []*os.File{t.File(), uf}
	if mf != nil {
		cmd.Env = append(cmd.Env, envMetricsFD+"=5")
		cmd.ExtraFiles = append(cmd.ExtraFiles, mf)
	}
	if lv := os.Getenv(envLogLevel); lv == "verbose" || lv == "debug" {
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		os.Remove(path)
		return fmt.Errorf("starting daemon: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(readyTimeout)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			os.Remove(path)
			return fmt.Errorf("daemon exited before it was ready: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if cl, err := ipc.Dial(ipc.DefaultSocketDir, name); err == nil {
			_, gerr := cl.Get()
			cl.Close()
			if gerr == nil {
				cmd.Process.Release()
				return nil
			}
		}
	}
	cmd.Process.Kill()
	os.Remove(path)
	return fmt.Errorf("daemon did not answer on its UAPI socket within %v", readyTimeout)
}

func runDaemonChild(iface string, mc metricsConfig) error {
	ln, err := inheritedMetricsListener()
	if err != nil {
		return err
	}
	if ln != nil {
		mc.ln = ln
	}
	fd, err := strconv.Atoi(os.Getenv(envTunFD))
	if err != nil {
		return fmt.Errorf("%s: %w", envTunFD, err)
	}
	t, err := tun.CreateFromFile(os.NewFile(uintptr(fd), "/dev/net/tun"), defaultMTU)
	if err != nil {
		return fmt.Errorf("TUN from fd %d: %w", fd, err)
	}
	name, err := t.Name()
	if err != nil {
		name = iface
	}
	ufd, err := strconv.Atoi(os.Getenv(envUAPIFD))
	if err != nil {
		t.Close()
		return fmt.Errorf("%s: %w", envUAPIFD, err)
	}
	path, err := ipc.SocketPath(ipc.DefaultSocketDir, name)
	if err != nil {
		t.Close()
		return err
	}
	l, err := ipc.FileListener(os.NewFile(uintptr(ufd), "uapi"), path)
	if err != nil {
		t.Close()
		return err
	}
	return serve(name, t, l, mc)
}

// serve runs the device until a signal, the TUN going away, or the socket
// file being removed.
func serve(name string, t tun.Device, l *ipc.Listener, mc metricsConfig) error {
	logf, errf := loggers(fmt.Sprintf("fips-go(%s): ", name))
	applySchedSlice(logf, errf)
	stopProcs, onTraffic := adaptProcs(logf, errf)
	defer stopProcs()
	d, err := device.New(t, conn.NewDefault(bindOptions(logf)), device.Options{
		Logf:      errf,
		OnTraffic: onTraffic,
		Timers:    testTimerParams(),
		PeerQueue: envInt("FIPS_GO_PEER_QUEUE", 0),
		Batches:   envInt("FIPS_GO_BATCHES", 0),
		Workers:   envInt("FIPS_GO_WORKERS", 0),
		AQM:       aqmParams(errf),
		// Under a handshake flood: the cookie replies and handshake
		// reads a second (0: the device's defaults).
		CookieReplies:  envInt("FIPS_GO_COOKIE_REPLIES", 0),
		HandshakeReads: envInt("FIPS_GO_HANDSHAKE_READS", 0),
	})
	if err != nil {
		l.Close()
		t.Close()
		return err
	}
	// Before the UAPI socket answers: the parent reports ready only then.
	stopMetrics, err := startMetrics(mc, name, d, logf)
	if err != nil {
		l.Close()
		d.Close()
		return err
	}
	defer stopMetrics()
	names := dnsfollow.NewTable()
	stopFollow := followNames(d, names, logf)
	defer stopFollow()
	go func() {
		if err := l.Serve(namedDevice{d, names}, ipc.ServeOptions{Logf: logf}); err != nil {
			errf("UAPI: %v", err)
		}
	}()
	if path := os.Getenv("FIPS_GO_CPUPROFILE"); path != "" {
		// For profiling the daemon under real traffic; written on shutdown.
		if f, err := os.Create(path + "." + name); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer func() { pprof.StopCPUProfile(); f.Close() }()
			}
		}
	}
	defer writeHeapProfile(name)
	logf("interface %s is up (transport AEAD: %s)", name, chachapoly.Implementation())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sig:
		logf("received %v, shutting down", s)
	case <-d.Done():
		logf("device stopped: %v", d.Err())
	case <-l.Removed():
		logf("UAPI socket removed, shutting down")
	}
	l.Close()
	d.Close()
	return nil
}

// bindOptions maps the environment switches for offloads onto the bind.
func bindOptions(logf func(string, ...any)) conn.Options {
	return conn.Options{
		DisableGSO: envBool("FIPS_GO_DISABLE_GSO"),
		DisableGRO: envBool("FIPS_GO_DISABLE_GRO"),
		// SO_RCVBUF/SO_SNDBUF per socket in bytes (0: conn's default).
		SocketBuffer: envInt("FIPS_GO_SOCKET_BUFFER", 0),
		MaxConnected: maxConnected(),
		Logf:         logf,
	}
}

// maxConnected reads FIPS_GO_CONNECTED_SOCKETS, the cap on per-peer
// connected UDP sockets: unset is conn's default, 0 turns them off.
func maxConnected() int {
	switch n := envInt("FIPS_GO_CONNECTED_SOCKETS", -1); n {
	case -1:
		return 0
	case 0:
		return -1
	default:
		return n
	}
}

// aqmParams reads FIPS_GO_AQM_TARGET and FIPS_GO_AQM_INTERVAL (Go
// durations, e.g. 1ms; a target of "off" turns queue management off). A
// value that does not parse is reported and the default kept.
func aqmParams(errf func(string, ...any)) aqm.Params {
	var p aqm.Params
	if v := os.Getenv("FIPS_GO_AQM_TARGET"); v == "off" {
		p.Target = -1
	} else if v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errf("FIPS_GO_AQM_TARGET=%q: want a positive duration such as 1ms, or off; using the default", v)
		} else {
			p.Target = d
		}
	}
	if v := os.Getenv("FIPS_GO_AQM_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errf("FIPS_GO_AQM_INTERVAL=%q: want a positive duration such as 10ms; using the default", v)
		} else {
			p.Interval = d
		}
	}
	return p
}

// defaultSchedSlice is the daemon's scheduler slice request by default:
// none (0), the kernel's own. 300 µs first measured a shorter loaded RTT,
// then a same-binary A/B measured it 8-25% slower at the same RTT. See
// README, "Queues and latency".
const defaultSchedSlice = 0

// applySchedSlice asks for FIPS_GO_SCHED_SLICE (default
// defaultSchedSlice; 0 asks for nothing) on every thread of the daemon,
// before the device starts its goroutines. The daemon starts no other
// program, so nothing else inherits it.
func applySchedSlice(logf, errf func(string, ...any)) {
	d, err := schedslice.Parse(os.Getenv("FIPS_GO_SCHED_SLICE"), defaultSchedSlice)
	if err != nil {
		errf("FIPS_GO_SCHED_SLICE=%v; using the default", err)
		d = defaultSchedSlice
	}
	if d == 0 {
		return
	}
	n, err := schedslice.Apply(d)
	if err != nil {
		errf("scheduler slice %v: %v", d, err)
		return
	}
	logf("scheduler slice %v on %d threads", d, n)
}

// adaptProcs runs the GOMAXPROCS controller (internal/procs) for the
// daemon's life, unless FIPS_GO_PROCS=fixed or GOMAXPROCS is set in the
// environment: a value the user chose stands. It returns the function
// that stops it, and the device's OnTraffic, which wakes the controller
// when traffic resumes after it parked (nil when it does not run).
func adaptProcs(logf, errf func(string, ...any)) (stop, onTraffic func()) {
	switch v := os.Getenv("FIPS_GO_PROCS"); v {
	case "", "auto":
	case "fixed":
		return func() {}, nil
	default:
		errf("FIPS_GO_PROCS=%q: want auto or fixed; using auto", v)
	}
	if os.Getenv("GOMAXPROCS") != "" {
		return func() {}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w := procs.NewWaker()
	go func() {
		defer close(done)
		procs.Run(ctx, procs.Options{Logf: logf, Waker: w})
	}()
	return func() {
		cancel()
		<-done
	}, w.Kick
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v >= 0 {
		return v
	}
	return def
}

func envBool(k string) bool {
	v, _ := strconv.ParseBool(os.Getenv(k))
	return v
}

// writeHeapProfile writes a heap profile to $FIPS_GO_MEMPROFILE.suffix when
// that is set: where the memory goes under real traffic.
func writeHeapProfile(suffix string) {
	path := os.Getenv("FIPS_GO_MEMPROFILE")
	if path == "" {
		return
	}
	if f, err := os.Create(path + "." + suffix); err == nil {
		_ = pprof.Lookup("heap").WriteTo(f, 0)
		f.Close()
	}
}
