package metrics

import (
	"bytes"
	"encoding/json"
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
		Properties: map[string]any{"orderId": "o-1"}})
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
	require.Equal(t, "o-1", doc["orderId"], "a property, not a dimension")
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

func TestCatalogNamesEveryUnit(t *testing.T) {
	t.Parallel()
	for _, n := range Names() {
		require.Contains(t, []Unit{Count, Seconds, Milliseconds}, Catalog[n], n)
	}
}
