package publicapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every Example of the module runs (`go test` checks its `// Output:`), or
// its doc comment says why it does not ("Not run here: …"): an Example with
// neither compiles and is never checked.
func TestEveryExampleRunsOrSaysWhy(t *testing.T) {
	t.Parallel()
	r := root(t)
	dirs, nested := goDirs(t, r)
	var silent []string
	examples := 0
	for dir, files := range dirs {
		if inNested(dir, nested) {
			continue
		}
		for _, f := range files {
			if !strings.HasSuffix(f, "_test.go") {
				continue
			}
			fs := token.NewFileSet()
			file, err := parser.ParseFile(fs, f, nil, parser.ParseComments)
			require.NoError(t, err)
			for _, d := range file.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Example") {
					continue
				}
				examples++
				if fn.Doc != nil && strings.Contains(fn.Doc.Text(), "Not run here") {
					continue
				}
				if hasOutput(file, fn) {
					continue
				}
				rel, _ := filepath.Rel(r, f)
				silent = append(silent, rel+": "+fn.Name.Name)
			}
		}
	}
	require.NotZero(t, examples)
	sort.Strings(silent)
	require.Empty(t, silent, "Examples with no // Output: and no \"Not run here\" in their doc")
}

// hasOutput reports whether an output comment sits inside fn's body.
func hasOutput(file *ast.File, fn *ast.FuncDecl) bool {
	for _, g := range file.Comments {
		if g.Pos() < fn.Body.Lbrace || g.End() > fn.Body.Rbrace {
			continue
		}
		text := strings.ToLower(g.Text())
		if strings.HasPrefix(text, "output:") || strings.HasPrefix(text, "unordered output:") {
			return true
		}
	}
	return false
}
