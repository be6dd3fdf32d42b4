package metrics

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEncodeIsEmbeddedMetricFormat(t *testing.T) {
	t.Parallel()
	at := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	sets, dims := Step("greet", "", "shop", []string{DimAgent})
	b := Encode(Line{Time: at, Dimensions: sets, Dims: dims,
		Metrics:    []Metric{{Name: QueueWait, Unit: Milliseconds, Value: 1500}, {Name: AgentDone, Unit: Count, Value: 1}},
		Properties: map[string]any{"order": "o-1"}})
	require.Equal(t, byte('\n'), b[len(b)-1], "one line")
	var doc map[string]any
	require.NoError(t, json.Unmarshal(b, &doc))
	aws := doc["_aws"].(map[string]any)
	require.Equal(t, float64(at.UnixMilli()), aws["Timestamp"])
	d := aws["CloudWatchMetrics"].([]any)[0].(map[string]any)
	require.Equal(t, "SAS", d["Namespace"])
	require.Equal(t, []any{[]any{"Workflow", "Step", "Agent"}, []any{"Agent"}}, d["Dimensions"])
	require.Equal(t, []any{map[string]any{"Name": "QueueWait", "Unit": "Milliseconds"}, map[string]any{"Name": "AgentDone", "Unit": "Count"}}, d["Metrics"])
	require.Equal(t, float64(1500), doc["QueueWait"])
	require.Equal(t, "greet", doc["Workflow"])
	require.Equal(t, "unknown", doc["Step"], "CloudWatch takes no empty dimension value")
	require.Equal(t, "o-1", doc["order"], "a property, not a dimension")
}

func TestEmitterSkipsEmptyLinesAndNilWriters(t *testing.T) {
	t.Parallel()
	var nilEmitter *Emitter
	require.NoError(t, nilEmitter.Emit(Line{Metrics: []Metric{{Name: GiveUps, Unit: Count, Value: 1}}}))
	require.NoError(t, NewEmitter(nil).Emit(Line{Metrics: []Metric{{Name: GiveUps, Unit: Count, Value: 1}}}))
	var out bytes.Buffer
	e := NewEmitter(&out)
	require.NoError(t, e.Emit(Line{}))
	require.Zero(t, out.Len())
	require.NoError(t, e.Emit(Line{Metrics: []Metric{{Name: GiveUps, Unit: Count, Value: 1}}}))
	require.Contains(t, out.String(), `"Dimensions":[[]]`, "no dimension set: the sum over the deployment")
}

// Every metric constant declared in metrics.go is in the catalogue, with a
// unit CloudWatch knows, and the catalogue holds nothing else: a metric
// added without its catalogue entry would be missing from the docs' table
// and the dashboard.
func TestCatalogHoldsEveryMetricWithItsUnit(t *testing.T) {
	t.Parallel()
	declared := metricConstants(t)
	require.GreaterOrEqual(t, len(declared), 20, "the metrics declared in metrics.go")
	require.ElementsMatch(t, declared, Names())
	for _, n := range Names() {
		require.Contains(t, []Unit{Count, Seconds, Milliseconds}, Catalog[n], n)
	}
}

// metricConstants is the value of every untyped string constant that
// metrics.go declares, less the namespace and the dimension names.
func metricConstants(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "metrics.go", nil, 0)
	require.NoError(t, err)
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			if vs.Type != nil {
				continue // a Unit
			}
			for i, name := range vs.Names {
				if name.Name == "Namespace" || strings.HasPrefix(name.Name, "Dim") {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				require.True(t, ok && lit.Kind == token.STRING, name.Name)
				v, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				out = append(out, v)
			}
		}
	}
	return out
}
