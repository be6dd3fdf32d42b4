package publicapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/msgctx"
)

// TestLogKeysAreOneVocabulary holds every log call of the module's code to
// docs/observability.md's table of log keys: no key spelled as one of the
// table's "never" forms, every key lowerCamelCase, and every key of the
// table used somewhere.
func TestLogKeysAreOneVocabulary(t *testing.T) {
	t.Parallel()
	r := root(t)
	b, err := os.ReadFile(filepath.Join(r, "docs", "observability.md"))
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(b), "| key | what | never spelled |")
	require.True(t, ok, "docs/observability.md has the log keys' table")
	table, _, _ = strings.Cut(table, "\n\n")
	documented, never := map[string]bool{}, map[string]string{}
	code := regexp.MustCompile("`([A-Za-z]+)`")
	for _, row := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
		cells := strings.Split(row, "|")
		require.Len(t, cells, 5, "a row of the log keys' table: %s", row)
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			documented[m[1]] = true
		}
		for _, m := range code.FindAllStringSubmatch(cells[3], -1) {
			never[m[1]] = strings.TrimSpace(cells[1])
		}
	}
	used := logKeys(t, r)
	require.NotEmpty(t, used)
	// The keys the message's context adds to every line (internal/msgctx).
	used[msgctx.MessageIDKey], used[msgctx.TraceIDKey] = "internal/msgctx", "internal/msgctx"
	camel := regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)
	var wrong []string
	for k, at := range used {
		if instead, ok := never[k]; ok {
			wrong = append(wrong, at+": "+strconv.Quote(k)+" is spelled "+instead)
		} else if !camel.MatchString(k) {
			wrong = append(wrong, at+": "+strconv.Quote(k)+" is not lowerCamelCase")
		}
	}
	for k := range documented {
		if _, ok := used[k]; !ok {
			wrong = append(wrong, "docs/observability.md: "+strconv.Quote(k)+" is in the table but no log line uses it")
		}
	}
	sort.Strings(wrong)
	require.Empty(t, wrong)
}

// logKeys finds the keys of every log call in the module's non-test code
// (a slog.Logger's Info, Warn, Error, Debug, their Context forms, Log and
// With, and slog's attribute constructors), and of every EMF line's
// properties (metrics.Line.Properties), with where each is first used.
// Keys passed as variables are not seen: the code passes literals.
func logKeys(t *testing.T, r string) map[string]string {
	t.Helper()
	firstKey := map[string]int{"Info": 1, "Warn": 1, "Error": 1, "Debug": 1, "InfoContext": 2, "WarnContext": 2, "ErrorContext": 2, "DebugContext": 2, "Log": 3, "With": 0}
	attrs := map[string]bool{"String": true, "Int": true, "Int64": true, "Uint64": true, "Float64": true, "Bool": true, "Duration": true, "Time": true, "Any": true, "Group": true}
	keys := map[string]string{}
	note := func(fs *token.FileSet, e ast.Expr) bool {
		l, ok := e.(*ast.BasicLit)
		if !ok || l.Kind != token.STRING {
			return false
		}
		k, err := strconv.Unquote(l.Value)
		require.NoError(t, err)
		if _, seen := keys[k]; !seen {
			p := fs.Position(l.Pos())
			rel, _ := filepath.Rel(r, p.Filename)
			keys[k] = rel + ":" + strconv.Itoa(p.Line)
		}
		return true
	}
	dirs, nested := goDirs(t, r)
	for dir, files := range dirs {
		if inNested(dir, nested) {
			continue
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			fs := token.NewFileSet()
			file, err := parser.ParseFile(fs, f, nil, 0)
			require.NoError(t, err)
			ast.Inspect(file, func(n ast.Node) bool {
				if props(n, func(e ast.Expr) { note(fs, e) }) {
					return true
				}
				c, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := c.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "slog" {
					if attrs[sel.Sel.Name] && len(c.Args) > 0 {
						note(fs, c.Args[0])
					}
					return true
				}
				start, ok := firstKey[sel.Sel.Name]
				if !ok {
					return true
				}
				for i := start; i < len(c.Args) && note(fs, c.Args[i]); i += 2 {
				}
				return true
			})
		}
	}
	return keys
}

// props calls note on each key an EMF line's properties are given, in
// `Properties: map[string]any{"key": …}` or `x.Properties["key"] = …`,
// and reports whether n was one of those.
func props(n ast.Node, note func(ast.Expr)) bool {
	switch n := n.(type) {
	case *ast.KeyValueExpr:
		if id, ok := n.Key.(*ast.Ident); !ok || id.Name != "Properties" {
			return false
		}
		m, ok := n.Value.(*ast.CompositeLit)
		if !ok {
			return false
		}
		for _, e := range m.Elts {
			if kv, ok := e.(*ast.KeyValueExpr); ok {
				note(kv.Key)
			}
		}
		return true
	case *ast.IndexExpr:
		if sel, ok := n.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "Properties" {
			note(n.Index)
			return true
		}
	}
	return false
}
