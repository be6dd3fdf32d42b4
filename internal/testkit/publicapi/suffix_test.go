package publicapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOneSuffixPerPackage: a public package names its settings' types with
// one suffix, Config or Options, not both (issue 30 §4); a deprecated alias
// kept for an old name does not count.
func TestOneSuffixPerPackage(t *testing.T) {
	t.Parallel()
	r := root(t)
	for _, dir := range []string{"agent", "workflow", "sastest", "completion", filepath.Join("infra", "sascdk")} {
		suffixes := settingsSuffixes(t, filepath.Join(r, dir))
		require.LessOrEqual(t, len(suffixes), 1, "%s names its settings' types with several suffixes: %v", dir, suffixes)
	}
}

// TestOneSuffixPerPackageSeesBoth checks the check on a package that has
// both suffixes, one of them deprecated and one not.
func TestOneSuffixPerPackageSeesBoth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := "package p\n\n// A configures.\ntype AConfig struct{}\n\n// B is older.\n//\n// Deprecated: use AConfig.\ntype BOptions = AConfig\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o600))
	require.Len(t, settingsSuffixes(t, dir), 1, "a deprecated alias does not count")
	more := "package p\n\n// C configures too.\ntype COptions struct{}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "q.go"), []byte(more), 0o600))
	require.Len(t, settingsSuffixes(t, dir), 2)
}

// settingsSuffixes lists, for the package in dir, the suffixes (Config,
// Options) of its exported types that are not deprecated, with a type of
// each.
func settingsSuffixes(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	found := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ParseComments)
		require.NoError(t, err)
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				ts := s.(*ast.TypeSpec)
				doc := ts.Doc
				if doc == nil {
					doc = g.Doc
				}
				if !ts.Name.IsExported() || (doc != nil && strings.Contains(doc.Text(), "Deprecated:")) {
					continue
				}
				for _, suffix := range []string{"Config", "Options"} {
					if strings.HasSuffix(ts.Name.Name, suffix) {
						found[suffix] = ts.Name.Name
					}
				}
			}
		}
	}
	return found
}
