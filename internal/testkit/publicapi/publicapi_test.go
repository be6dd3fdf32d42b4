// Package publicapi checks the line between what users import and what
// they cannot: no nested module (the CDK construct, the examples) imports
// an internal/ package, and every public package has a package comment and
// a runnable Example.
package publicapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/sas-go/sas"

// root is the repository root, two levels up.
func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(r, "go.mod"))
	require.NoError(t, err)
	return r
}

// goDirs maps each directory holding .go files (below root, outside
// node_modules, testdata and build output) to its files, and reports the
// directories that start a nested module.
func goDirs(t *testing.T, r string) (dirs map[string][]string, nested []string) {
	t.Helper()
	dirs = map[string][]string{}
	err := filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", "testdata", "cdk.out", "dist", ".git", ".rig":
				return filepath.SkipDir
			}
			if p != r {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					nested = append(nested, p)
				}
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") {
			dirs[filepath.Dir(p)] = append(dirs[filepath.Dir(p)], p)
		}
		return nil
	})
	require.NoError(t, err)
	return dirs, nested
}

// sharedWithTheConstruct are the internal packages the construct's module
// (infra/) may import, and it alone: internal/sizing, the timing rules the
// construct deploys with and the test kit and dev server share, written
// once. A leaf of constants and formulas (the standard library only), and
// the modules are released together at one version (CHANGELOG.md), so the
// construct never meets another release's.
var sharedWithTheConstruct = []string{module + "/internal/sizing"}

// TestNestedModulesImportNoInternalPackage: the construct's module and the
// examples build against the public packages alone, as a user's code must
// (the construct's exception: sharedWithTheConstruct).
func TestNestedModulesImportNoInternalPackage(t *testing.T) {
	t.Parallel()
	r := root(t)
	dirs, nested := goDirs(t, r)
	require.NotEmpty(t, nested, "infra/ is a module of its own")
	fset := token.NewFileSet()
	checked := 0
	for dir, files := range dirs {
		if !inNested(dir, nested) {
			continue
		}
		inInfra := inNested(dir, []string{filepath.Join(r, "infra")})
		for _, f := range files {
			file, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
			require.NoError(t, err)
			checked++
			for _, imp := range file.Imports {
				path := strings.Trim(imp.Path.Value, `"`)
				if inInfra && slices.Contains(sharedWithTheConstruct, path) {
					continue
				}
				require.False(t, strings.HasPrefix(path, module+"/internal"),
					"%s imports %s: code outside the main module may use only its public packages", f, path)
			}
		}
	}
	require.Positive(t, checked)
}

// TestPublicPackagesAreDocumented: every package users import has a package
// comment and at least one runnable Example.
func TestPublicPackagesAreDocumented(t *testing.T) {
	t.Parallel()
	r := root(t)
	public := []string{"workflow", "agent", filepath.Join("infra", "sascdk"), "completion"}
	if _, err := os.Stat(filepath.Join(r, "sastest")); err == nil {
		public = append(public, "sastest")
	}
	fset := token.NewFileSet()
	for _, rel := range public {
		files, err := filepath.Glob(filepath.Join(r, rel, "*.go"))
		require.NoError(t, err, rel)
		documented, examples := false, 0
		for _, name := range files {
			f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
			require.NoError(t, err, name)
			if !strings.HasSuffix(name, "_test.go") {
				if f.Doc != nil && strings.HasPrefix(f.Doc.Text(), "Package ") {
					documented = true
				}
				continue
			}
			for _, d := range f.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Example") {
					examples++
				}
			}
		}
		require.True(t, documented, "%s has no package comment", rel)
		require.Positive(t, examples, "%s has no runnable Example", rel)
	}
}
