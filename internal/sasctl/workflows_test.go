package sasctl

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// validate says ok for good files and names the file, the field and the
// reason, one line each, for bad ones: by the schema, then by the rules a
// schema cannot state.
func TestWorkflowsValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	badSchema := filepath.Join(dir, "schema.json")
	require.NoError(t, os.WriteFile(badSchema, []byte(`{"workflows":[{"name":"x","steps":[{"name":"a","agent":"b","action":"c","timeout":"ten"}]}]}`), 0o644))
	badRule := filepath.Join(dir, "rule.json")
	require.NoError(t, os.WriteFile(badRule, []byte(`{"workflows":[{"name":"x","steps":[{"name":"a","agent":"b","action":"c","timeout":"1s"},{"name":"a","agent":"b","action":"c","timeout":"1s"}]}]}`), 0o644))

	var out bytes.Buffer
	require.NoError(t, Workflows(context.Background(), []string{"validate", "../../workflow/testdata/travel.json", "../../workflow/testdata/deployment.json"}, &out))
	require.Equal(t, "../../workflow/testdata/travel.json: ok, 1 workflow(s)\n../../workflow/testdata/deployment.json: ok, 1 workflow(s)\n", out.String())

	err := Workflows(context.Background(), []string{"validate", badSchema, badRule}, &out)
	require.EqualError(t, err, badSchema+`: /workflows/0/steps/0/timeout: 'ten' does not match pattern '^(0|([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$' (schema)`+"\n"+
		badRule+`: workflows[0].steps[1].name: "a" is already the name of step 0 of this workflow`)
	require.ErrorIs(t, Workflows(context.Background(), []string{"write", "only-a-package"}, &out), ErrUsage)
}
