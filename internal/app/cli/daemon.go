package cli

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/internal/app/metrics"
	"github.com/fips-go/fips-go/internal/app/procs"
	"github.com/fips-go/fips-go/internal/app/sandbox"
	"github.com/fips-go/fips-go/internal/chachapoly"
	"github.com/fips-go/fips-go/ipc"
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
	// envMonitorFD is ours: the worker's end of the pair to its monitor
	// (package privsep), set by the monitor only.
	envMonitorFD = "FIPS_GO_MONITOR_FD"
	defaultMTU   = 1420
	readyTimeout = 15 * time.Second
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
	// Before anything is created, so that a bad value is the command's
	// error and not a daemon's that never became ready.
	st, err := readSettings(os.Getenv)
	if err != nil {
		return err
	}
	if os.Getenv(envForeground) == "1" && os.Getenv(envTunFD) != "" {
		return runDaemonChild(iface, mc, st)
	}
	if !foreground {
		return daemonize(iface, mc)
	}
	t, name, l, err := createInterface(iface)
	if err != nil {
		return err
	}
	if separate(st) {
		return monitorForeground(name, t, l, mc, st)
	}
	return serve(name, t, l, mc, st, daemonRole{})
}

// createInterface creates the TUN and, under the name the kernel gave it,
// the UAPI socket; on error nothing is left behind.
func createInterface(iface string) (tun.Device, string, *ipc.Listener, error) {
	t, err := createTUN(iface, defaultMTU)
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
	linkForAWG(name, l)
	return t, name, l, nil
}

// linkForAWG gives the UAPI socket its second name in awg(8)'s directory,
// so that amneziawg-tools' awg and awg-quick drive the daemon as wg and
// wg-quick do. Without it the daemon still works: the failure is logged.
func linkForAWG(name string, l *ipc.Listener) {
	if err := l.Link(ipc.AmneziaSocketDir); err != nil {
		_, errf := loggers(fmt.Sprintf("fips-go(%s): ", name))
		errf("awg(8) will not find this interface: %v", err)
	}
}

// awgSocketPath is iface's socket name in awg(8)'s directory.
func awgSocketPath(iface string) string {
	p, _ := ipc.SocketPath(ipc.AmneziaSocketDir, iface) // iface is a valid name here
	return p
}

// daemonize creates the TUN and socket, starts the child on them, and waits
// until the child answers a get request, so that a script may use the
// interface the moment this returns.
func daemonize(iface string, mc metricsConfig) error {
	mf, err := metricsFile(mc)
	if err != nil {
		return err
	}
	if mf != nil {
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
	cmd.SysProcAttr = daemonAttr()
	if err := cmd.Start(); err != nil {
		os.Remove(path)
		return fmt.Errorf("starting daemon: %w", err)
	}
	// The child has its own copy now. Ours must go at once: a listener
	// kept open here would take the readiness probe's connection after
	// the child died, and its get would wait for an answer forever.
	uf.Close()
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

// metricsFile binds the metrics address, if one was given, and returns
// the socket to pass on to a child (nil for none).
func metricsFile(mc metricsConfig) (*os.File, error) {
	if mc.addr == "" {
		return nil, nil
	}
	ln, err := metrics.ListenTCP(mc.addr)
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	mf, err := ln.File()
	if err != nil {
		return nil, fmt.Errorf("metrics socket: %w", err)
	}
	return mf, nil
}

// inheritedFD is the descriptor a parent passed in the variable k, or nil
// when k is unset.
func inheritedFD(k, name string) (*os.File, error) {
	v := os.Getenv(k)
	if v == "" {
		return nil, nil
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("%s=%q: want a descriptor number above 2", k, v)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// runDaemonChild runs with what a parent passed on: as the worker when a
// monitor started it (envMonitorFD), else as the monitor of a separated
// daemon or as the whole daemon.
func runDaemonChild(iface string, mc metricsConfig, st settings) error {
	tf, err := inheritedFD(envTunFD, "tun")
	if err != nil {
		return err
	}
	uf, err := inheritedFD(envUAPIFD, "uapi")
	if err != nil || uf == nil {
		return fmt.Errorf("%s: %w", envUAPIFD, err)
	}
	monitor, err := inheritedFD(envMonitorFD, "monitor")
	if err != nil {
		return err
	}
	if monitor == nil && separate(st) {
		mf, err := inheritedFD(envMetricsFD, "metrics")
		if err != nil {
			return err
		}
		return runMonitor(iface, tf, uf, mf, st)
	}
	ln, err := inheritedMetricsListener()
	if err != nil {
		return err
	}
	if ln != nil {
		mc.ln = ln
	}
	t, err := tunFromFile(tf, defaultMTU)
	if err != nil {
		return fmt.Errorf("TUN from %s: %w", envTunFD, err)
	}
	name, err := t.Name()
	if err != nil {
		name = iface
	}
	path, err := ipc.SocketPath(ipc.DefaultSocketDir, name)
	if err != nil {
		t.Close()
		return err
	}
	l, err := ipc.FileListener(uf, path)
	if err != nil {
		t.Close()
		return err
	}
	linkForAWG(name, l) // the parent linked it: this records it for Close
	role := daemonRole{}
	if monitor != nil {
		if role, err = workerRole(t, monitor); err != nil {
			l.Close()
			t.Close()
			return err
		}
	}
	return serve(name, t, l, mc, st, role)
}

// daemonRole is what serve needs to know of the process it runs in: the
// sandbox's role, and in a worker, the call that tells the monitor the
// worker is stopping (nil otherwise).
type daemonRole struct {
	sandbox sandbox.Role
	exit    func() error
}

// serve runs the device until a signal, the TUN going away, or the socket
// file being removed.
func serve(name string, t tun.Device, l *ipc.Listener, mc metricsConfig, st settings, role daemonRole) error {
	// A Go program that writes to a broken pipe on its standard output or
	// error dies of SIGPIPE unless it asked for the signal: the daemon's
	// log reader going away (a restarted collector, `fips-go wg0 | logger`
	// ending) must cost log lines, not the tunnel. Notify, not Ignore, so
	// nothing started from here inherits SIGPIPE ignored.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	logf, errf := loggers(fmt.Sprintf("fips-go(%s): ", name))
	stopProfile, err := st.startCPUProfile(name)
	if err != nil {
		l.Close()
		t.Close()
		return err
	}
	defer stopProfile()
	defer st.writeHeapProfile(name, errf)
	stopProcs, onTraffic := adaptProcs(logf)
	defer stopProcs()
	d, err := device.New(t, conn.NewDefault(st.bind(logf)), device.Options{
		Logf:      errf,
		OnTraffic: onTraffic,
		Timers:    testTimerParams(),
		// Beside the UAPI socket, opened before the sandbox applies:
		// where the peers were, for the next process (device/resume.go).
		StateFile: stateFile(name),
		// Path-MTU probes are for peers that run fips-go (see
		// device.Options.PathProbes): on only when asked.
		PathProbes: st.pathProbes,
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
	h, stopFollow, err := followNames(d, logf)
	if err != nil {
		l.Close()
		d.Close()
		return err
	}
	defer stopFollow()
	// Everything the daemon opens with root's privileges exists now: the
	// TUN, the UAPI socket, the metrics listener, the profile.
	sb := sandboxDaemon(st, role.sandbox, errf)
	logf("sandbox: %s", sb)
	go func() {
		if err := l.Serve(sandboxedDevice{h, sb.String()}, ipc.ServeOptions{Logf: logf}); err != nil {
			errf("UAPI: %v", err)
		}
	}()
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
	if role.exit != nil {
		// The monitor removes the socket file (its directory is root's)
		// and lets go of its copy of the TUN, so that both are gone by
		// the time this process has exited.
		if err := role.exit(); err != nil {
			errf("monitor: %v", err)
		}
	}
	l.Close()
	d.Close()
	return nil
}

// sandboxDaemon applies internal/app/sandbox to the interface daemon, unless
// FIPS_GO_SANDBOX turned it off; what could not be applied is logged as
// an error, and the daemon runs on with the rest.
func sandboxDaemon(st settings, role sandbox.Role, errf func(string, ...any)) sandbox.Status {
	if st.noSandbox {
		return sandbox.Status{Off: true}
	}
	cfg := sandbox.Config{Role: role, SocketDir: ipc.DefaultSocketDir, LinkDir: ipc.AmneziaSocketDir}
	if st.memProfile != "" {
		cfg.WriteFiles = append(cfg.WriteFiles, st.memProfile)
	}
	s := sandbox.Apply(cfg)
	for _, p := range s.Problems {
		errf("sandbox: %s", p)
	}
	return s
}

// sandboxedDevice answers get=fipssandbox with the line the start-up log
// printed.
type sandboxedDevice struct {
	namedDevice
	sandbox string
}

func (d sandboxedDevice) Sandbox() string { return d.sandbox }

// adaptProcs runs the GOMAXPROCS controller (internal/app/procs) for the
// daemon's life, unless GOMAXPROCS is set in the environment: a value the
// user chose stands. The controller takes at most one P from the runtime's
// default, so on a machine with many CPUs it changes little; package
// procs says why that bound is there. It returns the function that stops
// it, and the device's OnTraffic, which wakes the controller when traffic
// resumes after it parked (nil when it does not run).
func adaptProcs(logf func(string, ...any)) (stop, onTraffic func()) {
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

// stateFile is where the daemon of iface remembers its peers' endpoints
// for the next process: beside its UAPI socket.
func stateFile(iface string) string {
	return filepath.Join(ipc.DefaultSocketDir, iface+".state")
}
