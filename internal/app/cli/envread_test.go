package cli

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The environment is read here and nowhere else in the product's code, so
// that every switch is listed, documented and checked in one place
// (settings.go). The exceptions are plumbing, not switches: the namespace
// child reads the spec its parent wrote for it, and the e2e helper is for
// tests. Passing os.Environ on to a child process is not reading it.
func TestEnvironmentReadOnlyInCLI(t *testing.T) {
	allowed := map[string]bool{
		"internal/app/userns/child_linux.go":      true, // FIPS_GO_USERNS_CHILD, the re-exec's own spec
		"internal/app/userns/guard_linux.go":      true, // whether that spec is there at all
		"internal/testkit/netnstest/netnstest.go": true, // FIPS_E2E, tests only
		"internal/app/cli/timers_testbuild.go":    true, // (in this package; listed for clarity)
	}
	read := regexp.MustCompile(`\bos\.(Getenv|LookupEnv)\(`)
	root := filepath.Join("..", "..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "tests" || rel == "internal/app/cli" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || rel == "main.go" || allowed[rel] {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if loc := read.FindIndex(b); loc != nil {
			t.Errorf("%s reads the environment (%s): settings belong in internal/app/cli, options elsewhere", rel, b[loc[0]:loc[1]])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
