package workflow_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/workflow"
)

// The retry policy's fields (issue 19), and the older names they replace:
// both parse to the same policy, and the schema takes both.
func TestRetryPolicyNamesOldAndNew(t *testing.T) {
	t.Parallel()
	step := func(retry string) string {
		return `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "x", "timeout": "10s", "retry": ` + retry + `}]}]}`
	}
	newer := step(`{"maximumAttempts": 5, "initialInterval": "2s", "backoffCoefficient": 1.5, "maximumInterval": "1m", "tries": 4, "nonRetryableErrors": ["InventoryDown", "Timeout"]}`)
	older := step(`{"failureThreshold": 5, "attempts": 4, "backoff": {"base": "2s", "max": "1m"}, "backoffCoefficient": 1.5, "nonRetryableErrors": ["InventoryDown", "Timeout"]}`)
	want := workflow.Retry{MaximumAttempts: 5, InitialInterval: workflow.Duration(2 * time.Second), BackoffCoefficient: 1.5,
		MaximumInterval: workflow.Duration(time.Minute), Tries: 4, NonRetryableErrors: []string{"InventoryDown", "Timeout"}}

	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(workflow.Schema()))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("schema.json", doc))
	sch, err := c.Compile("schema.json")
	require.NoError(t, err)

	for _, body := range []string{newer, older} {
		ws, err := workflow.Parse("f.json", []byte(body))
		require.NoError(t, err)
		require.Equal(t, want, ws[0].Steps[0].Retry.Policy())
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(body)))
		require.NoError(t, err)
		require.NoError(t, sch.Validate(v))
	}
	require.Equal(t, workflow.Retry{}, (*workflow.Retry)(nil).Policy())

	for _, tc := range []struct{ body, path, reason string }{
		{step(`{"failureThreshold": 3, "maximumAttempts": 4}`), "retry.maximumAttempts", "older name failureThreshold"},
		{step(`{"attempts": 3, "tries": 4}`), "retry.tries", "older name attempts"},
		{step(`{"backoff": {"base": "1s"}, "initialInterval": "2s"}`), "retry.initialInterval", "older name backoff.base"},
		{step(`{"backoffCoefficient": 0.5}`), "retry.backoffCoefficient", "between 1 and 10"},
		{step(`{"initialInterval": "1m", "maximumInterval": "1s"}`), "retry.maximumInterval", "below the initial interval"},
		{step(`{"maximumInterval": "16m"}`), "retry.maximumInterval", "between 0 and 15m"},
		{step(`{"nonRetryableErrors": ["no spaces"]}`), "retry.nonRetryableErrors[0]", "1-64 characters"},
		{step(`{"maximumAttempts": 101}`), "retry.maximumAttempts", "between 1 and 100"},
	} {
		_, err := workflow.Parse("f.json", []byte(tc.body))
		require.ErrorIs(t, err, workflow.ErrInvalid, tc.body)
		require.ErrorContains(t, err, "workflows[0].steps[0]."+tc.path, tc.body)
		require.ErrorContains(t, err, tc.reason, tc.body)
	}
}

// Steps that share a name must share their policy, whichever names state it.
func TestSharedStepNamesShareTheRetryPolicy(t *testing.T) {
	t.Parallel()
	s := func(r *workflow.Retry) workflow.Step {
		return workflow.Step{Name: "s", Agent: "a", Action: "x", Timeout: workflow.Duration(time.Second), Retry: r}
	}
	a := workflow.Workflow{Name: "a", Steps: []workflow.Step{s(&workflow.Retry{FailureThreshold: 4})}}
	b := workflow.Workflow{Name: "b", Steps: []workflow.Step{s(&workflow.Retry{MaximumAttempts: 4})}}
	require.NoError(t, workflow.Validate(a, b))
	c := workflow.Workflow{Name: "c", Steps: []workflow.Step{s(&workflow.Retry{MaximumAttempts: 4, BackoffCoefficient: 3})}}
	require.ErrorContains(t, workflow.Validate(a, c), "other limits or retry policy")
}

// An undo's own retry policy (undoRetry): parsed, written back, checked by
// the schema, refused where it is wrong; a file without it still loads,
// and the step's retry does not stand for it.
func TestUndoRetryPolicy(t *testing.T) {
	t.Parallel()
	step := func(undo, extra string) string {
		return `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "x", "undo": "` + undo +
			`", "timeout": "10s", "retry": {"maximumAttempts": 2}` + extra + `}]}]}`
	}
	good := step("y", `, "undoRetry": {"maximumAttempts": 40, "initialInterval": "30s", "backoffCoefficient": 1.5, "maximumInterval": "15m", "nonRetryableErrors": ["AlreadyRefunded"]}`)
	want := &workflow.UndoRetry{MaximumAttempts: 40, InitialInterval: workflow.Duration(30 * time.Second), BackoffCoefficient: 1.5,
		MaximumInterval: workflow.Duration(15 * time.Minute), NonRetryableErrors: []string{"AlreadyRefunded"}}

	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(workflow.Schema()))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("schema.json", doc))
	sch, err := c.Compile("schema.json")
	require.NoError(t, err)

	ws, err := workflow.Parse("f.json", []byte(good))
	require.NoError(t, err)
	require.Equal(t, want, ws[0].Steps[0].UndoRetry)
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(good)))
	require.NoError(t, err)
	require.NoError(t, sch.Validate(v))

	var buf bytes.Buffer
	require.NoError(t, workflow.Write(&buf, ws...))
	again, err := workflow.Parse("f.json", buf.Bytes())
	require.NoError(t, err)
	require.Equal(t, ws, again, "written and read back the same:\n%s", buf.String())

	older, err := workflow.Parse("f.json", []byte(step("y", "")))
	require.NoError(t, err, "a file from before undoRetry loads")
	require.Nil(t, older[0].Steps[0].UndoRetry, "the deployment's undo policy, not the step's retry")

	for _, tc := range []struct{ body, path, reason string }{
		{step("y", `, "undoRetry": {"maximumAttempts": 101}`), "undoRetry.maximumAttempts", "between 1 and 100"},
		{step("y", `, "undoRetry": {"backoffCoefficient": 0.5}`), "undoRetry.backoffCoefficient", "between 1 and 10"},
		{step("y", `, "undoRetry": {"initialInterval": "1m", "maximumInterval": "1s"}`), "undoRetry.maximumInterval", "below the initial interval"},
		{step("y", `, "undoRetry": {"maximumInterval": "16m"}`), "undoRetry.maximumInterval", "between 0 and 15m"},
		{step("y", `, "undoRetry": {"nonRetryableErrors": ["no spaces"]}`), "undoRetry.nonRetryableErrors[0]", "1-64 characters"},
		{step("y", `, "undoRetry": {"initialInterval": "soon"}`), "undoRetry.initialInterval", "not a duration"},
		{step("y", `, "undoRetry": {"tries": 3}`), "undoRetry.tries", "unknown field"},
		{step("", `, "undoRetry": {"maximumAttempts": 5}`), "undoRetry", "the step has no undo"},
	} {
		_, err := workflow.Parse("f.json", []byte(tc.body))
		require.ErrorIs(t, err, workflow.ErrInvalid, tc.body)
		require.ErrorContains(t, err, "workflows[0].steps[0]."+tc.path, tc.body)
		require.ErrorContains(t, err, tc.reason, tc.body)
	}

	// Steps that share a name share their undo's policy too.
	s := func(u *workflow.UndoRetry) workflow.Step {
		return workflow.Step{Name: "s", Agent: "a", Action: "x", Undo: "y", Timeout: workflow.Duration(time.Second), UndoRetry: u}
	}
	a := workflow.Workflow{Name: "a", Steps: []workflow.Step{s(&workflow.UndoRetry{MaximumAttempts: 4})}}
	b := workflow.Workflow{Name: "b", Steps: []workflow.Step{s(&workflow.UndoRetry{MaximumAttempts: 5})}}
	require.ErrorContains(t, workflow.Validate(a, b), "other limits or retry policy")
}
