package workflow_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/workflow"
)

// A fan-out step loads from a file, and Write writes it back to the same
// definition (what `sasctl workflows write` runs).
func TestForEachLoadsAndRoundTrips(t *testing.T) {
	t.Parallel()
	defs, err := workflow.Parse("wf.json", []byte(`{"workflows": [{"name": "order", "steps": [
		{"name": "reserve", "agent": "stock", "action": "POST /reservations", "undo": "DELETE /reservations", "timeout": "30s",
		 "forEach": {"items": "payload.lineItems", "concurrency": 4}},
		{"name": "ship", "agent": "shipping", "action": "POST /shipments", "timeout": "30s"}]}]}`))
	require.NoError(t, err)
	f := defs[0].Steps[0].ForEach
	require.Equal(t, &workflow.ForEach{Items: "payload.lineItems", Concurrency: 4}, f)
	require.Equal(t, 4, f.Limit())
	require.Nil(t, defs[0].Steps[1].ForEach)
	require.Equal(t, workflow.DefaultConcurrency, workflow.ForEach{Items: "payload.x"}.Limit())

	var buf bytes.Buffer
	require.NoError(t, workflow.Write(&buf, defs...))
	require.Contains(t, buf.String(), `"forEach"`)
	back, err := workflow.Parse("written.json", buf.Bytes())
	require.NoError(t, err)
	require.Equal(t, defs, back)

	// The Go API says the same; a concurrency of 0 is written without it.
	api := []workflow.Workflow{{Name: "order", Steps: []workflow.Step{{Name: "reserve", Agent: "stock", Action: "POST /reservations",
		Timeout: workflow.Duration(30 * time.Second), ForEach: &workflow.ForEach{Items: `payload.lineItems.map(l, l.sku)`}}}}}
	buf.Reset()
	require.NoError(t, workflow.Write(&buf, api...))
	require.NotContains(t, buf.String(), `"concurrency"`)
	back, err = workflow.Parse("written.json", buf.Bytes())
	require.NoError(t, err)
	require.Equal(t, api, back)
}
