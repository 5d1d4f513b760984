package cli

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryLeavesOutHeavyPackages keeps packages out of the fips-go binary
// whose code every daemon would carry in its RSS whether it uses them or
// not: net/http (with crypto/tls, x509 and the HTTP/2 tables) cost a loaded
// tunnel daemon 3 MiB of its 18 MiB peak, and the Prometheus client
// libraries more. The metrics endpoint and the HTTP proxy speak their small
// part of HTTP themselves.
func TestBinaryLeavesOutHeavyPackages(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list the binary's packages")
	}
	out, err := exec.Command(gobin, "list", "-deps", "github.com/fips-go/fips-go").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	banned := []string{"net/http", "crypto/tls", "github.com/prometheus/", "github.com/VictoriaMetrics/"}
	for pkg := range strings.FieldsSeq(string(out)) {
		for _, b := range banned {
			if pkg == b || strings.HasPrefix(pkg, b+"/") || strings.HasSuffix(b, "/") && strings.HasPrefix(pkg, b) {
				t.Errorf("the binary links %s", pkg)
			}
		}
	}
}

// Every package under internal/ but this one is a leaf: it imports none of
// the packages the CLI wires (device, conn, tun, ipc, metrics, the
// proxies, dnsfollow, rootless). What drives a device lives above
// internal/, where the library can export it.
func TestInternalPackagesAreLeaves(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list the packages")
	}
	const mod = "github.com/fips-go/fips-go/"
	out, err := exec.Command(gobin, "list", mod+"internal/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var leaves []string
	for pkg := range strings.FieldsSeq(string(out)) {
		if pkg != mod+"internal/cli" {
			leaves = append(leaves, pkg)
		}
	}
	out, err = exec.Command(gobin, append([]string{"list", "-deps"}, leaves...)...).Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for pkg := range strings.FieldsSeq(string(out)) {
		if rest, ok := strings.CutPrefix(pkg, mod); ok && !strings.HasPrefix(rest, "internal/") {
			t.Errorf("a package under internal/ imports %s", pkg)
		}
	}
}
