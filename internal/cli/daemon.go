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
	"github.com/fips-go/fips-go/internal/chachapoly"
	"github.com/fips-go/fips-go/internal/metrics"
	"github.com/fips-go/fips-go/internal/procs"
	"github.com/fips-go/fips-go/internal/sandbox"
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
	return serve(name, t, l, mc, st)
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
	cmd.SysProcAttr = daemonAttr()
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

func runDaemonChild(iface string, mc metricsConfig, st settings) error {
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
	t, err := tunFromFile(os.NewFile(uintptr(fd), "tun"), defaultMTU)
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
	return serve(name, t, l, mc, st)
}

// serve runs the device until a signal, the TUN going away, or the socket
// file being removed.
func serve(name string, t tun.Device, l *ipc.Listener, mc metricsConfig, st settings) error {
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
		StateFile: filepath.Join(ipc.DefaultSocketDir, name+".state"),
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
	sb := sandboxDaemon(st, errf)
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
	l.Close()
	d.Close()
	return nil
}

// sandboxDaemon applies internal/sandbox to the interface daemon, unless
// FIPS_GO_SANDBOX turned it off; what could not be applied is logged as
// an error, and the daemon runs on with the rest.
func sandboxDaemon(st settings, errf func(string, ...any)) sandbox.Status {
	if st.noSandbox {
		return sandbox.Status{Off: true}
	}
	cfg := sandbox.Config{SocketDir: ipc.DefaultSocketDir}
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

// adaptProcs runs the GOMAXPROCS controller (internal/procs) for the
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
