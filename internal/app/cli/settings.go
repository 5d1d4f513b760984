package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"

	"github.com/fips-go/fips-go/conn"
)

// The environment's switches beyond the wireguard-go contract (WG_*,
// LOG_LEVEL) and the metrics flags' FIPS_GO_METRICS and
// FIPS_GO_METRICS_MAX_PEERS. Each exists because a user has a reason to
// turn it: an escape hatch from a kernel's offload bug, a cap on the file
// descriptors a server spends, a profile of the daemon under real
// traffic. Tuning found by experiment is a default in device.Options and
// conn.Options instead, reachable from benchmarks and tests but not from
// here.
const (
	envDisableGSO       = "FIPS_GO_DISABLE_GSO"       // 1: no UDP_SEGMENT on send
	envDisableGRO       = "FIPS_GO_DISABLE_GRO"       // 1: no UDP_GRO on receive
	envConnectedSockets = "FIPS_GO_CONNECTED_SOCKETS" // cap on per-peer connected sockets; 0: none
	envCPUProfile       = "FIPS_GO_CPUPROFILE"        // debugging: CPU profile to PATH.IFACE on exit
	envMemProfile       = "FIPS_GO_MEMPROFILE"        // debugging: heap profile to PATH.IFACE on exit
	envSandbox          = "FIPS_GO_SANDBOX"           // off: no sandbox for the interface daemon or the rootless modes (debugging)
	envPathProbes       = "FIPS_GO_PATH_PROBES"       // 1: path-MTU probes, for peers that run fips-go
)

// settings are the switches, read and checked once at start: a value that
// does not parse stops the command with an error that names it, instead
// of a daemon that quietly runs with a setting the user did not ask for.
type settings struct {
	disableGSO, disableGRO bool
	maxConnected           int // as conn.Options.MaxConnected
	cpuProfile, memProfile string
	noSandbox              bool // FIPS_GO_SANDBOX=off
	pathProbes             bool // as device.Options.PathProbes
}

// readSettings reads the switches through getenv (os.Getenv but in tests).
func readSettings(getenv func(string) string) (settings, error) {
	var s settings
	var err error
	if s.disableGSO, err = envBool(getenv, envDisableGSO); err != nil {
		return s, err
	}
	if s.disableGRO, err = envBool(getenv, envDisableGRO); err != nil {
		return s, err
	}
	if s.pathProbes, err = envBool(getenv, envPathProbes); err != nil {
		return s, err
	}
	// on and off read better here than 1 and 0, which are taken too.
	switch v := getenv(envSandbox); v {
	case "", "on":
	case "off":
		s.noSandbox = true
	default:
		on, err := strconv.ParseBool(v)
		if err != nil {
			return s, fmt.Errorf("%s=%q: want off (or 0) to turn the sandbox off, on (or 1)", envSandbox, v)
		}
		s.noSandbox = !on
	}
	if v := getenv(envConnectedSockets); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return s, fmt.Errorf("%s=%q: want the most connected UDP sockets to keep, 0 for none", envConnectedSockets, v)
		}
		// The user's 0 means none; conn's zero is its default and a
		// negative cap turns them off.
		if n == 0 {
			n = -1
		}
		s.maxConnected = n
	}
	for _, p := range []struct {
		name string
		dst  *string
	}{{envCPUProfile, &s.cpuProfile}, {envMemProfile, &s.memProfile}} {
		v := getenv(p.name)
		if v == "" {
			continue
		}
		if fi, err := os.Stat(filepath.Dir(v)); err != nil || !fi.IsDir() {
			return s, fmt.Errorf("%s=%q: the profile's directory does not exist", p.name, v)
		}
		*p.dst = v
	}
	return s, nil
}

// envBool reads a switch: unset is false; anything strconv.ParseBool does
// not take (1, 0, true, false, ...) is an error.
func envBool(getenv func(string) string, k string) (bool, error) {
	v := getenv(k)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: want 1 or 0", k, v)
	}
	return b, nil
}

// bind is the bind's options under these settings.
func (s settings) bind(logf func(string, ...any)) conn.Options {
	return conn.Options{
		DisableGSO:   s.disableGSO,
		DisableGRO:   s.disableGRO,
		MaxConnected: s.maxConnected,
		Logf:         logf,
	}
}

// startCPUProfile profiles the daemon's CPU into cpuProfile.suffix, if
// set, until the returned stop; for profiling under real traffic.
func (s settings) startCPUProfile(suffix string) (stop func(), err error) {
	if s.cpuProfile == "" {
		return func() {}, nil
	}
	f, err := os.Create(s.cpuProfile + "." + suffix)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envCPUProfile, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", envCPUProfile, err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// writeHeapProfile writes a heap profile to memProfile.suffix, if set:
// where the memory goes under real traffic.
func (s settings) writeHeapProfile(suffix string, errf func(string, ...any)) {
	if s.memProfile == "" {
		return
	}
	f, err := os.Create(s.memProfile + "." + suffix)
	if err == nil {
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		errf("%s: %v", envMemProfile, err)
	}
}
