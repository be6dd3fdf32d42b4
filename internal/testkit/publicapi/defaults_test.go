package publicapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sizing"
)

// homeDefaults are the deployment's defaults internal/sizing holds, by the
// names a consumer gives them: a field or constant of one of these names
// (or Default and the name), or the variable named beside it, takes the
// home's value and never writes it again.
var homeDefaults = []struct {
	names []string
	env   string
	value int64 // a count, or a duration in nanoseconds
}{
	{[]string{"IndexShards", "Shards"}, "SAS_INDEX_SHARDS", sizing.DefaultIndexShards},
	{[]string{"MaxFailures", "MaxAttempts"}, "SAS_MAX_FAILURES", sizing.DefaultMaxAttempts},
	{[]string{"StepTimeout"}, "SAS_STEP_TIMEOUT", int64(sizing.DefaultStepTimeout)},
	{[]string{"PickupTimeout"}, "SAS_PICKUP_TIMEOUT", int64(sizing.DefaultPickupTimeout)},
	{[]string{"WaitLimit"}, "SAS_WAIT_LIMIT", int64(sizing.DefaultWaitLimit)},
	{[]string{"MaxReceiveCount", "MaxReceives"}, "", sizing.MaxReceiveCount},
}

// TestDefaultsHaveOneHome fails on a deployment default written again
// outside internal/sizing (issue 30 §2): in every module's non-test code, a
// constant, variable, field or assignment of a default's name, or a call
// that reads the default's variable, whose value is a literal expression
// (3, 30 * time.Second, time.Minute) equal to the home's. A different value,
// such as the local runs' shorter deadlines, is a choice of its own and
// passes; the same value must name the home.
func TestDefaultsHaveOneHome(t *testing.T) {
	t.Parallel()
	r := root(t)
	byName, byEnv := homeDefaultsByName()
	home := filepath.Join(r, "internal", "sizing")
	dirs, _ := goDirs(t, r)
	var again []string
	for dir, files := range dirs {
		if dir == home {
			continue
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			again = append(again, defaultsWrittenAgain(t, r, f, byName, byEnv)...)
		}
	}
	sort.Strings(again)
	require.Empty(t, again, "write these as internal/sizing's defaults (or the constant that names them)")
}

// TestDefaultsHaveOneHomeSeesALiteral checks the check: each form of a
// default written again is found.
func TestDefaultsHaveOneHomeSeesALiteral(t *testing.T) {
	t.Parallel()
	src := `package p
const DefaultStepTimeout = 30 * time.Second
var x = Config{Shards: 8}
func f(o *Options) {
	if o.PickupTimeout == 0 {
		o.PickupTimeout = 60 * time.Second
	}
	o.MaxFailures = 3
	n, _ := intVar(getenv, "SAS_INDEX_SHARDS", 8)
	w := durVar(getenv, "SAS_WAIT_LIMIT", 10*time.Minute)
	o.Shards, o.WaitLimit = 4, 2*time.Minute // other values: choices of their own
	o.MaxReceives = sizing.MaxReceiveCount
	o.Retry = sas.RetryPolicy{MaxAttempts: 3} // a step's own
}
`
	f := filepath.Join(t.TempDir(), "p.go")
	require.NoError(t, os.WriteFile(f, []byte(src), 0o600))
	byName, byEnv := homeDefaultsByName()
	got := defaultsWrittenAgain(t, filepath.Dir(f), f, byName, byEnv)
	require.Len(t, got, 6, "%q", got)
}

// homeDefaultsByName maps each name of a home default (and Default and the
// name), and each default's variable, to the home's value.
func homeDefaultsByName() (byName, byEnv map[string]int64) {
	byName, byEnv = map[string]int64{}, map[string]int64{}
	for _, d := range homeDefaults {
		for _, n := range d.names {
			byName[n], byName["Default"+n] = d.value, d.value
		}
		if d.env != "" {
			byEnv[d.env] = d.value
		}
	}
	return byName, byEnv
}

// defaultsWrittenAgain lists where file f writes a home default's value as
// a literal.
func defaultsWrittenAgain(t *testing.T, r, f string, byName, byEnv map[string]int64) []string {
	t.Helper()
	fs := token.NewFileSet()
	file, err := parser.ParseFile(fs, f, nil, 0)
	require.NoError(t, err)
	var out []string
	check := func(name string, want int64, e ast.Expr) {
		if v, ok := literalValue(e); ok && v == want {
			p := fs.Position(e.Pos())
			rel, _ := filepath.Rel(r, p.Filename)
			out = append(out, rel+":"+strconv.Itoa(p.Line)+": "+name+" is internal/sizing's default, written again")
		}
	}
	named := func(lhs ast.Expr) (string, int64, bool) {
		var n string
		switch l := lhs.(type) {
		case *ast.Ident:
			n = l.Name
		case *ast.SelectorExpr:
			n = l.Sel.Name
		default:
			return "", 0, false
		}
		v, ok := byName[n]
		return n, v, ok
	}
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ValueSpec:
			for i, id := range n.Names {
				if want, ok := byName[id.Name]; ok && i < len(n.Values) {
					check(id.Name, want, n.Values[i])
				}
			}
		case *ast.AssignStmt:
			if len(n.Lhs) != len(n.Rhs) {
				return true
			}
			for i, l := range n.Lhs {
				if name, want, ok := named(l); ok {
					check(name, want, n.Rhs[i])
				}
			}
		case *ast.CompositeLit:
			if retryPolicy(n.Type) {
				return true // a step's own retry policy, not the default
			}
			for _, e := range n.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					if name, want, ok := named(kv.Key); ok {
						check(name, want, kv.Value)
					}
				}
			}
		case *ast.CallExpr:
			for i, a := range n.Args {
				l, ok := a.(*ast.BasicLit)
				if !ok || l.Kind != token.STRING {
					continue
				}
				env, err := strconv.Unquote(l.Value)
				if want, ok := byEnv[env]; err == nil && ok {
					for _, other := range n.Args[i+1:] {
						check(env, want, other)
					}
				}
			}
		}
		return true
	})
	return out
}

// retryPolicy reports whether a composite literal's type is a retry policy
// (sas.RetryPolicy, workflow.Retry), whose MaxAttempts is a step's own.
func retryPolicy(typ ast.Expr) bool {
	if sel, ok := typ.(*ast.SelectorExpr); ok {
		typ = sel.Sel
	}
	id, ok := typ.(*ast.Ident)
	return ok && (id.Name == "RetryPolicy" || id.Name == "Retry")
}

// literalValue evaluates e when it is written with literals alone: an
// integer, a time unit (time.Second …), or their product.
func literalValue(e ast.Expr) (int64, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.INT {
			return 0, false
		}
		v, err := strconv.ParseInt(strings.ReplaceAll(e.Value, "_", ""), 0, 64)
		return v, err == nil
	case *ast.ParenExpr:
		return literalValue(e.X)
	case *ast.SelectorExpr:
		if pkg, ok := e.X.(*ast.Ident); !ok || pkg.Name != "time" {
			return 0, false
		}
		unit, ok := map[string]time.Duration{"Nanosecond": time.Nanosecond, "Microsecond": time.Microsecond,
			"Millisecond": time.Millisecond, "Second": time.Second, "Minute": time.Minute, "Hour": time.Hour}[e.Sel.Name]
		return int64(unit), ok
	case *ast.BinaryExpr:
		if e.Op != token.MUL {
			return 0, false
		}
		x, okx := literalValue(e.X)
		y, oky := literalValue(e.Y)
		return x * y, okx && oky
	}
	return 0, false
}
