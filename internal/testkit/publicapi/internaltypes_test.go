package publicapi

import (
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// publicPackages are the packages a user of the module imports.
var publicPackages = []string{
	"github.com/sas-go/sas/agent",
	"github.com/sas-go/sas/workflow",
	"github.com/sas-go/sas/sastest",
	"github.com/sas-go/sas/completion",
}

// No exported name of a public package shows an internal type: not a
// field, a parameter, a result, a method, a variable or an alias. A user
// could not name such a type, nor implement such an interface.
func TestPublicAPINamesNoInternalType(t *testing.T) {
	t.Parallel()
	// Compiled export data, as `go list -export` leaves it in the build
	// cache: type-checking from source would take minutes.
	out, err := exec.Command("go", append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}"}, publicPackages...)...).Output()
	require.NoError(t, err)
	exports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, file, ok := strings.Cut(line, "="); ok && file != "" {
			exports[path] = file
		}
	}
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	for _, path := range publicPackages {
		pkg, err := imp.Import(path)
		require.NoError(t, err, path)
		var found []string
		scope := pkg.Scope()
		for _, name := range scope.Names() {
			obj := scope.Lookup(name)
			if !obj.Exported() {
				continue
			}
			w := &internalWalker{seen: map[types.Type]bool{}}
			w.walk(obj.Type(), obj.Name())
			if tn, ok := obj.(*types.TypeName); ok {
				if named, ok := tn.Type().(*types.Named); ok {
					for i := range named.NumMethods() {
						if m := named.Method(i); m.Exported() {
							w.walk(m.Type(), obj.Name()+"."+m.Name())
						}
					}
				}
			}
			found = append(found, w.found...)
		}
		require.Empty(t, found, "%s shows internal types", path)
	}
}

// internalWalker finds internal named types in what a user of a type sees:
// exported fields, signatures and elements.
type internalWalker struct {
	seen  map[types.Type]bool
	found []string
}

func (w *internalWalker) walk(t types.Type, where string) {
	if t == nil || w.seen[t] {
		return
	}
	w.seen[t] = true
	switch t := t.(type) {
	case *types.Alias:
		w.walk(types.Unalias(t), where)
	case *types.Named:
		if p := t.Obj().Pkg(); p != nil && strings.Contains(p.Path(), "/internal/") {
			w.found = append(w.found, where+": "+t.String())
			return
		}
		w.walk(t.Underlying(), where)
	case *types.Pointer:
		w.walk(t.Elem(), where)
	case *types.Slice:
		w.walk(t.Elem(), where)
	case *types.Array:
		w.walk(t.Elem(), where)
	case *types.Map:
		w.walk(t.Key(), where)
		w.walk(t.Elem(), where)
	case *types.Chan:
		w.walk(t.Elem(), where)
	case *types.Signature:
		for i := range t.Params().Len() {
			w.walk(t.Params().At(i).Type(), where)
		}
		for i := range t.Results().Len() {
			w.walk(t.Results().At(i).Type(), where)
		}
	case *types.Struct:
		for i := range t.NumFields() {
			if f := t.Field(i); f.Exported() {
				w.walk(f.Type(), where+"."+f.Name())
			}
		}
	case *types.Interface:
		for i := range t.NumMethods() {
			if m := t.Method(i); m.Exported() {
				w.walk(m.Type(), where+"."+m.Name())
			}
		}
	}
}
