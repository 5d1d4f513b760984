package apicheck

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/fips-go/fips-go"

// layer is how high a package of the module sits: a package may import
// packages of its own layer and below, never above. The directories say
// it: internal/app (the command, the rootless services) above tunnel and
// internal/engine (the library and its set-up) above the public device,
// conn, tun and ipc with the small helpers at internal/'s top;
// internal/testkit is for tests only.
func layer(pkg string) int {
	p := strings.TrimPrefix(pkg, module)
	switch {
	case p == "" || strings.HasPrefix(p, "/internal/app/"):
		return 3
	case strings.HasPrefix(p, "/tunnel") || strings.HasPrefix(p, "/internal/engine"):
		return 2
	case strings.HasPrefix(p, "/internal/testkit/"), strings.HasPrefix(p, "/tests/"):
		return 4
	}
	return 1
}

// No package imports one of a higher layer, and no product code imports
// a test kit (test files may).
func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 || layer(f[0]) == 4 {
			continue
		}
		for _, imp := range f[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			if layer(imp) > layer(f[0]) {
				t.Errorf("%s (layer %d) imports %s (layer %d)", f[0], layer(f[0]), imp, layer(imp))
			}
		}
	}
}
