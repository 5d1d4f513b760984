package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/fips-go/fips-go/internal/testkit/netnstest"
)

// The binaries under test. They are built once per test process, on first
// use, into binDir; FIPS_GO_BIN replaces the build of the normal fips-go.
const (
	binFipsGo       = "fips-go"
	binFipsGoTimers = "fips-go-testtimers"
	binWireguardGo  = "wireguard-go"
	binAmneziaWG    = "amneziawg-go"
	binAmneziaWG2   = "amneziawg-go-2"
)

var (
	binDir    string
	buildMu   sync.Mutex
	buildDone = map[string]buildResult{}
)

type buildResult struct {
	path string
	err  error
}

func TestMain(m *testing.M) {
	// The test binary doubles as the traffic helper that runs inside the
	// namespaces (see helper_test.go).
	if spec := os.Getenv(helperEnv); spec != "" {
		os.Exit(helperMain(spec))
	}
	dir, err := os.MkdirTemp("", "fips-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(2)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// binPath returns the path of the named implementation, building it on the
// first call. A build failure fails the test (it is never a reason to skip).
func binPath(t testing.TB, name string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	r, ok := buildDone[name]
	if !ok {
		r = build(name)
		buildDone[name] = r
	}
	if r.err != nil {
		t.Fatalf("building %s: %v", name, r.err)
	}
	return r.path
}

func build(name string) buildResult {
	if name == binFipsGo {
		if p := os.Getenv("FIPS_GO_BIN"); p != "" {
			abs, err := filepath.Abs(p)
			return buildResult{path: abs, err: err}
		}
	}
	if name == binAmneziaWG {
		return buildAmneziaWG(amneziaWGVersion, binAmneziaWG)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		return buildResult{err: err}
	}
	out := filepath.Join(binDir, name)
	var args []string
	switch name {
	case binFipsGo:
		args = []string{"build", "-o", out, "."}
	case binFipsGoTimers:
		args = []string{"build", "-tags", "fipsgo_testtimers", "-o", out, "."}
	case binWireguardGo:
		// The reference peer at the version go.mod pins.
		args = []string{"build", "-o", out, "golang.zx2c4.com/wireguard"}
	default:
		return buildResult{err: fmt.Errorf("unknown binary %q", name)}
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return buildResult{err: fmt.Errorf("no go tool in PATH: %w", err)}
	}
	cmd := exec.Command(goTool, args...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return buildResult{err: fmt.Errorf("go %v: %w\n%s", args, err, b)}
	}
	return buildResult{path: out}
}

// requireRoot checks for what every test here needs: root, /dev/net/tun,
// and ip(8) with network namespaces.
func requireRoot(t testing.TB) {
	t.Helper()
	if testing.Short() && os.Getenv("FIPS_E2E") != "1" {
		t.Skip("end-to-end test skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		netnstest.SkipOrFail(t, "needs root (network namespaces, TUN devices)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		netnstest.SkipOrFail(t, "needs /dev/net/tun: %v", err)
	}
	requireTool(t, "ip")
}

// requireTool checks that each named command is in PATH (scripts/deps.sh
// installs them).
func requireTool(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			netnstest.SkipOrFail(t, "needs %s in PATH (bash scripts/deps.sh installs it)", n)
		}
	}
}
