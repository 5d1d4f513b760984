package apicheck

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/api.txt with the current API")

const golden = "testdata/api.txt"

// TestAPI fails when the exported API differs from the golden file, or when
// an exported signature names a type from an internal package.
func TestAPI(t *testing.T) {
	pkgs, err := Load(Public)
	if err != nil {
		t.Fatal(err)
	}
	lines, problems := API(pkgs)
	for _, p := range problems {
		t.Error(p)
	}
	got := strings.Join(lines, "\n") + "\n"
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (create it with: go test ./internal/testkit/apicheck -update)", err)
	}
	if d := diff(strings.Split(strings.TrimSuffix(string(want), "\n"), "\n"), lines); d != "" {
		t.Errorf("the exported API differs from %s (- golden, + now):\n%s\n"+
			"If the change is meant, regenerate it with: go test ./internal/testkit/apicheck -update",
			golden, d)
	}
}

// diff lists the lines only in want (-) and only in got (+); both are
// sorted, so one merge pass finds them.
func diff(want, got []string) string {
	var b strings.Builder
	i, j := 0, 0
	for i < len(want) || j < len(got) {
		switch {
		case j == len(got) || (i < len(want) && want[i] < got[j]):
			b.WriteString("- " + want[i] + "\n")
			i++
		case i == len(want) || got[j] < want[i]:
			b.WriteString("+ " + got[j] + "\n")
			j++
		default:
			i++
			j++
		}
	}
	return b.String()
}

type mapImporter map[string]*types.Package

func (m mapImporter) Import(path string) (*types.Package, error) { return m[path], nil }

func check(t *testing.T, path, src string, imp mapImporter) *types.Package {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path+".go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	conf := types.Config{Importer: imp}
	p, err := conf.Check(path, fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	imp[path] = p
	return p
}

// TestInternalFound checks that every way an exported signature can name a
// type from an internal package is reported, and nothing else is.
func TestInternalFound(t *testing.T) {
	imp := mapImporter{}
	check(t, "m/internal/x", "package x\ntype Y struct{ A int }\nfunc (Y) M() {}\n", imp)
	pub := check(t, "m/pub", `package pub
import "m/internal/x"
type Ok struct{ A int; b x.Y }
func F() *x.Y { return nil }
var V map[string][]x.Y
type S struct{ Field func(x.Y) }
type A = x.Y
type I interface{ M(chan x.Y) }
type E struct{ x.Y }
func (Ok) G(...x.Y) {}
type hidden struct{ P x.Y }
type H struct{ hidden }
`, imp)
	_, problems := API([]*types.Package{pub})
	want := []string{"func F", "var V", "S struct, Field", "type A =", "I interface, M", "E struct, embedded", "(Ok) G", "H struct, P"}
	if len(problems) != len(want) {
		t.Errorf("got %d problems, want %d:\n%s", len(problems), len(want), strings.Join(problems, "\n"))
	}
	for _, w := range want {
		found := false
		for _, p := range problems {
			found = found || strings.Contains(p, w)
		}
		if !found {
			t.Errorf("no problem reported for %q", w)
		}
	}
}
