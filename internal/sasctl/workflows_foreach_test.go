package sasctl

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// validate takes a fan-out step, and names a bad one's field: by the
// schema (a concurrency past 50), then by the rules a schema cannot state
// (a list expression that is not a list).
func TestWorkflowsValidateAFanOut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, steps string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(`{"workflows":[{"name":"order","steps":[`+steps+`]}]}`), 0o644))
		return p
	}
	good := write("good.json", `{"name":"reserve","agent":"stock","action":"POST /holds","undo":"DELETE /holds","timeout":"30s","forEach":{"items":"payload.lineItems","concurrency":4}}`)
	wide := write("wide.json", `{"name":"reserve","agent":"stock","action":"POST /holds","timeout":"30s","forEach":{"items":"payload.lineItems","concurrency":51}}`)
	notList := write("notlist.json", `{"name":"reserve","agent":"stock","action":"POST /holds","timeout":"30s","forEach":{"items":"payload.count + 1"}}`)

	var out bytes.Buffer
	require.NoError(t, Workflows(context.Background(), []string{"validate", good}, &out))
	require.Equal(t, good+": ok, 1 workflow(s)\n", out.String())
	err := Workflows(context.Background(), []string{"validate", wide, notList}, &out)
	require.ErrorContains(t, err, wide+`: /workflows/0/steps/0/forEach/concurrency: `)
	require.ErrorContains(t, err, notList+`: workflows[0].steps[0].forEach.items: step "reserve": the list is of type int, not a list`)
}
