// Package apicheck lists the exported API of fips-go's public packages, one
// line per identifier in the manner of Go's api/*.txt files, and finds
// exported signatures that name a type code outside the module cannot name
// (one from an internal package). Its test compares the list with a
// committed golden file, so every change to the public API is a reviewed
// diff.
package apicheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// Public is the supported API of the module, as tunnel/doc.go lists it.
var Public = []string{
	"github.com/fips-go/fips-go/conn",
	"github.com/fips-go/fips-go/conn/membind",
	"github.com/fips-go/fips-go/device",
	"github.com/fips-go/fips-go/device/noise",
	"github.com/fips-go/fips-go/device/timers",
	"github.com/fips-go/fips-go/ipc",
	"github.com/fips-go/fips-go/tun",
	"github.com/fips-go/fips-go/tun/memtun",
	"github.com/fips-go/fips-go/tun/netstack",
	"github.com/fips-go/fips-go/tunnel",
}

// Load type-checks pkgs from the export data `go list -export` leaves in
// the build cache, which is much faster than checking every dependency
// (gVisor among them) from source.
func Load(pkgs []string) ([]*types.Package, error) {
	args := append([]string{"list", "-export", "-deps", "-json=ImportPath,Export"}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	export := map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		export[p.ImportPath] = p.Export
	}
	lookup := func(path string) (io.ReadCloser, error) {
		f, ok := export[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	}
	imp := importer.ForCompiler(token.NewFileSet(), "gc", lookup)
	var res []*types.Package
	for _, p := range pkgs {
		tp, err := imp.Import(p)
		if err != nil {
			return nil, err
		}
		res = append(res, tp)
	}
	return res, nil
}

// API returns the sorted lines describing every exported identifier of
// pkgs, and one problem for each exported signature that mentions a type
// from an internal package.
func API(pkgs []*types.Package) (lines, problems []string) {
	for _, p := range pkgs {
		w := &walker{pkg: p}
		w.pkgAPI()
		lines = append(lines, w.lines...)
		problems = append(problems, w.problems...)
	}
	slices.Sort(lines)
	lines = slices.Compact(lines)
	slices.Sort(problems)
	problems = slices.Compact(problems)
	return lines, problems
}

type walker struct {
	pkg      *types.Package
	lines    []string
	problems []string
}

// qualify writes other packages' types with their full import path, so
// that a type from an internal package is visible in the golden file.
func (w *walker) qualify(p *types.Package) string {
	if p == w.pkg {
		return ""
	}
	return p.Path()
}

func (w *walker) str(t types.Type) string { return types.TypeString(t, w.qualify) }

// emit records one line and checks the types it mentions.
func (w *walker) emit(text string, ts ...types.Type) {
	line := "pkg " + w.pkg.Path() + ", " + text
	w.lines = append(w.lines, line)
	w.check(line, ts...)
}

func (w *walker) check(line string, ts ...types.Type) {
	for _, t := range ts {
		seen := map[types.Type]bool{}
		if bad := internalIn(t, seen); bad != "" {
			w.problems = append(w.problems, fmt.Sprintf("%s: names %s, which code outside the module cannot name", line, bad))
		}
	}
}

func (w *walker) pkgAPI() {
	if isInternal(w.pkg.Path()) {
		w.problems = append(w.problems, "pkg "+w.pkg.Path()+" is internal but listed as public")
	}
	scope := w.pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch o := obj.(type) {
		case *types.Const:
			w.emit(fmt.Sprintf("const %s %s = %s", name, w.str(o.Type()), o.Val().ExactString()), o.Type())
		case *types.Var:
			w.emit(fmt.Sprintf("var %s %s", name, w.str(o.Type())), o.Type())
		case *types.Func:
			sig := o.Type().(*types.Signature)
			w.emit("func "+name+w.typeParams(sig.TypeParams())+w.sigString(sig), sig)
		case *types.TypeName:
			w.typeAPI(o)
		}
	}
}

// sigString writes a signature without parameter names, which are not
// part of the API, as Go's api files do.
func (w *walker) sigString(sig *types.Signature) string {
	var b strings.Builder
	b.WriteString("(")
	ps := sig.Params()
	for i := range ps.Len() {
		if i > 0 {
			b.WriteString(", ")
		}
		t := ps.At(i).Type()
		if sig.Variadic() && i == ps.Len()-1 {
			b.WriteString("..." + w.str(t.(*types.Slice).Elem()))
		} else {
			b.WriteString(w.str(t))
		}
	}
	b.WriteString(")")
	rs := sig.Results()
	switch rs.Len() {
	case 0:
	case 1:
		b.WriteString(" " + w.str(rs.At(0).Type()))
	default:
		b.WriteString(" (")
		for i := range rs.Len() {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(w.str(rs.At(i).Type()))
		}
		b.WriteString(")")
	}
	return b.String()
}

func (w *walker) typeAPI(o *types.TypeName) {
	name := o.Name()
	if o.IsAlias() {
		rhs := types.Unalias(o.Type())
		w.emit(fmt.Sprintf("type %s = %s", name, w.str(rhs)), rhs)
		return
	}
	named := o.Type().(*types.Named)
	if tp := named.TypeParams(); tp.Len() > 0 {
		var ps []string
		for i := range tp.Len() {
			p := tp.At(i)
			ps = append(ps, p.Obj().Name()+" "+w.str(p.Constraint()))
			w.check("pkg "+w.pkg.Path()+", type "+name, p.Constraint())
		}
		name += "[" + strings.Join(ps, ", ") + "]"
	}
	switch u := named.Underlying().(type) {
	case *types.Struct:
		w.emit(fmt.Sprintf("type %s struct", name))
		w.fields(name, u, map[*types.Struct]bool{})
	case *types.Interface:
		w.emit(fmt.Sprintf("type %s interface { %s }", name, w.ifaceMethods(u)))
		for i := range u.NumMethods() {
			m := u.Method(i)
			if m.Exported() {
				sig := m.Type().(*types.Signature)
				w.emit(fmt.Sprintf("type %s interface, %s%s", name, m.Name(), w.sigString(sig)), sig)
			}
		}
		for i := range u.NumEmbeddeds() {
			e := u.EmbeddedType(i)
			w.emit(fmt.Sprintf("type %s interface, embeds %s", name, w.str(e)), e)
		}
	default:
		w.emit(fmt.Sprintf("type %s %s", name, w.str(u)), u)
	}
	// Methods of T and *T, promoted ones included: outside code can call
	// them all.
	ms := types.NewMethodSet(types.NewPointer(named))
	for i := range ms.Len() {
		sel := ms.At(i)
		m := sel.Obj().(*types.Func)
		if !m.Exported() {
			continue
		}
		if _, ok := named.Underlying().(*types.Interface); ok {
			continue
		}
		recv := name
		if _, ptr := m.Type().(*types.Signature).Recv().Type().(*types.Pointer); ptr {
			recv = "*" + name
		}
		sig := m.Type().(*types.Signature)
		if len(sel.Index()) > 1 {
			w.emit(fmt.Sprintf("method (%s) %s%s (promoted)", recv, m.Name(), w.sigString(sig)), sig)
		} else {
			w.emit(fmt.Sprintf("method (%s) %s%s", recv, m.Name(), w.sigString(sig)), sig)
		}
	}
}

func (w *walker) ifaceMethods(u *types.Interface) string {
	var ms []string
	for i := range u.NumExplicitMethods() {
		m := u.ExplicitMethod(i)
		if !m.Exported() {
			ms = append(ms, "unexported methods")
			break
		}
	}
	for i := range u.NumExplicitMethods() {
		if m := u.ExplicitMethod(i); m.Exported() {
			ms = append(ms, m.Name())
		}
	}
	return strings.Join(ms, ", ")
}

// fields lists the exported fields of a struct, and those an embedded
// unexported struct promotes, since outside code can set them too.
func (w *walker) fields(name string, s *types.Struct, seen map[*types.Struct]bool) {
	if seen[s] {
		return
	}
	seen[s] = true
	for i := range s.NumFields() {
		f := s.Field(i)
		if f.Exported() {
			if f.Embedded() {
				w.emit(fmt.Sprintf("type %s struct, embedded %s", name, w.str(f.Type())), f.Type())
			} else {
				w.emit(fmt.Sprintf("type %s struct, %s %s", name, f.Name(), w.str(f.Type())), f.Type())
			}
			continue
		}
		if f.Embedded() {
			t := f.Type()
			if p, ok := t.(*types.Pointer); ok {
				t = p.Elem()
			}
			if es, ok := t.Underlying().(*types.Struct); ok {
				w.fields(name, es, seen)
			}
		}
	}
}

func isInternal(path string) bool {
	for _, e := range strings.Split(path, "/") {
		if e == "internal" {
			return true
		}
	}
	return false
}

// internalIn returns the first named type from an internal package that t
// mentions, or "". It does not look into a named type's definition: a
// public named type is checked where it is declared.
func internalIn(t types.Type, seen map[types.Type]bool) string {
	if t == nil || seen[t] {
		return ""
	}
	seen[t] = true
	switch t := t.(type) {
	case *types.Named:
		if obj := t.Obj(); obj.Pkg() != nil && isInternal(obj.Pkg().Path()) {
			return obj.Pkg().Path() + "." + obj.Name()
		}
		if args := t.TypeArgs(); args != nil {
			for i := range args.Len() {
				if s := internalIn(args.At(i), seen); s != "" {
					return s
				}
			}
		}
	case *types.Alias:
		if obj := t.Obj(); obj.Pkg() != nil && isInternal(obj.Pkg().Path()) {
			return obj.Pkg().Path() + "." + obj.Name()
		}
		return internalIn(types.Unalias(t), seen)
	case *types.Pointer:
		return internalIn(t.Elem(), seen)
	case *types.Slice:
		return internalIn(t.Elem(), seen)
	case *types.Array:
		return internalIn(t.Elem(), seen)
	case *types.Chan:
		return internalIn(t.Elem(), seen)
	case *types.Map:
		if s := internalIn(t.Key(), seen); s != "" {
			return s
		}
		return internalIn(t.Elem(), seen)
	case *types.Signature:
		for _, tup := range []*types.Tuple{t.Params(), t.Results()} {
			for i := range tup.Len() {
				if s := internalIn(tup.At(i).Type(), seen); s != "" {
					return s
				}
			}
		}
	case *types.Struct:
		for i := range t.NumFields() {
			if f := t.Field(i); f.Exported() || f.Embedded() {
				if s := internalIn(f.Type(), seen); s != "" {
					return s
				}
			}
		}
	case *types.Interface:
		for i := range t.NumMethods() {
			if s := internalIn(t.Method(i).Type(), seen); s != "" {
				return s
			}
		}
		for i := range t.NumEmbeddeds() {
			if s := internalIn(t.EmbeddedType(i), seen); s != "" {
				return s
			}
		}
	case *types.TypeParam:
		return internalIn(t.Constraint(), seen)
	case *types.Union:
		for i := range t.Len() {
			if s := internalIn(t.Term(i).Type(), seen); s != "" {
				return s
			}
		}
	}
	return ""
}

func (w *walker) typeParams(tp *types.TypeParamList) string {
	if tp.Len() == 0 {
		return ""
	}
	var ps []string
	for i := range tp.Len() {
		p := tp.At(i)
		w.check("pkg "+w.pkg.Path()+", type parameter "+p.Obj().Name(), p.Constraint())
		ps = append(ps, p.Obj().Name()+" "+w.str(p.Constraint()))
	}
	return "[" + strings.Join(ps, ", ") + "]"
}
