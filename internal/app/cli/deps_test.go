package cli

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryLeavesOutHeavyPackages keeps packages out of the fips-go binary
// whose code every daemon would carry in its RSS whether it uses them or
// not: net/http (with its HTTP/2 tables) cost a loaded tunnel daemon
// 3 MiB of its 18 MiB peak, and the Prometheus client libraries more. The
// metrics endpoint and the HTTP proxy speak their small part of HTTP
// themselves. crypto/tls is in, for the TLS stream transport: the binary
// is 3.5 MB larger with it and an idle daemon about 1.9 MiB larger, all of
// it the binary's own pages, shared between the privilege-separated
// daemon's two processes.
func TestBinaryLeavesOutHeavyPackages(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list the binary's packages")
	}
	out, err := exec.Command(gobin, "list", "-deps", "github.com/fips-go/fips-go").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	banned := []string{"net/http", "github.com/prometheus/", "github.com/VictoriaMetrics/"}
	for pkg := range strings.FieldsSeq(string(out)) {
		for _, b := range banned {
			if pkg == b || strings.HasPrefix(pkg, b+"/") || strings.HasSuffix(b, "/") && strings.HasPrefix(pkg, b) {
				t.Errorf("the binary links %s", pkg)
			}
		}
	}
}

// The supported API is a short, deliberate list (README "Go library" and
// tunnel's package documentation say the same): a new package outside
// internal/ and tests/ is a promise to every importer, so it has to be
// added here on purpose.
func TestPublicPackagesAreTheDocumentedOnes(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list the packages")
	}
	const mod = "github.com/fips-go/fips-go"
	public := map[string]bool{
		mod:                    true, // the command
		mod + "/conn":          true,
		mod + "/conn/membind":  true,
		mod + "/device":        true,
		mod + "/device/noise":  true,
		mod + "/device/timers": true,
		mod + "/ipc":           true,
		mod + "/tun":           true,
		mod + "/tun/memtun":    true,
		mod + "/tun/netstack":  true,
		mod + "/tunnel":        true,
	}
	out, err := exec.Command(gobin, "list", mod+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for pkg := range strings.FieldsSeq(string(out)) {
		rest := strings.TrimPrefix(strings.TrimPrefix(pkg, mod), "/")
		if strings.HasPrefix(rest, "tests/") || strings.Contains("/"+rest+"/", "/internal/") {
			continue
		}
		if !public[pkg] {
			t.Errorf("%s is importable by other modules but is not in the documented API: move it under internal/ or document it", pkg)
		}
	}
}
