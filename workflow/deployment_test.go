package workflow_test

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/workflow"
)

func TestParseFileWithDeployment(t *testing.T) {
	t.Parallel()
	f, err := workflow.LoadFile("testdata/deployment.json")
	require.NoError(t, err)
	require.Len(t, f.Workflows, 1)
	require.Equal(t, workflow.AgentQueues{Queue: "Greet-1a2b3c-shop", PriorityQueue: "Greet-1a2b3c-shop-lane", Replies: "Greet-1a2b3c-shop-replies"}, f.Deployment.Agents["shop"])
	require.Equal(t, 30*time.Second, f.Deployment.Limits.StepTimeout.D())

	// Only a deployment: the functions' reference workflows run.
	f, err = workflow.ParseFile("d.json", []byte(`{"deployment": {"agents": {"payments": {"queue": "q"}}}}`))
	require.NoError(t, err)
	require.Nil(t, f.Workflows)
	_, err = workflow.Parse("d.json", []byte(`{"deployment": {}}`))
	require.EqualError(t, err, "d.json: workflows: required: a list of workflows", "Parse wants workflows")
}

// deploymentBad are sections Deployment.Validate (through ParseFile) and the
// published schema both refuse.
var deploymentBad = []struct{ name, body, err string }{
	{"no queue", `{"deployment": {"agents": {"a": {}}}}`, "d.json: deployment.agents.a.queue: required: a queue URL or a queue name"},
	{"bad queue", `{"deployment": {"agents": {"a": {"queue": "a b"}}}}`, `d.json: deployment.agents.a.queue: "a b": want a queue URL`},
	{"bad agent", `{"deployment": {"agents": {"a/b": {"queue": "q"}}}}`, `d.json: deployment.agents.a/b: agent name "a/b"`},
	{"unknown field", `{"deployment": {"agent": {}}}`, `d.json: deployment.agent: unknown field "agent"`},
	{"bad replies", `{"deployment": {"agents": {"a": {"queue": "q", "replies": "r s"}}}}`, `d.json: deployment.agents.a.replies: "r s": want a queue URL`},
	{"bad limit", `{"deployment": {"limits": {"maxFailures": -1}}}`, "d.json: deployment.limits.maxFailures: -1: want 1 to 100"},
	{"neither", `{}`, "d.json: workflows: required"},
}

func TestDeploymentRefusedByParseAndSchema(t *testing.T) {
	t.Parallel()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(workflow.Schema()))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("schema.json", doc))
	sch, err := c.Compile("schema.json")
	require.NoError(t, err)

	good, err := os.ReadFile("testdata/deployment.json")
	require.NoError(t, err)
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(good))
	require.NoError(t, err)
	require.NoError(t, sch.Validate(v))

	for _, tc := range deploymentBad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := workflow.ParseFile("d.json", []byte(tc.body))
			require.ErrorContains(t, err, tc.err)
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(tc.body)))
			require.NoError(t, err)
			require.Error(t, sch.Validate(v), "the schema accepts %s", tc.body)
		})
	}
}

// Write writes what Parse reads back as the same definitions.
func TestWriteRoundTrips(t *testing.T) {
	t.Parallel()
	defs, err := workflow.Load("testdata/travel.json")
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, workflow.Write(&buf, defs...))
	back, err := workflow.Parse("written.json", buf.Bytes())
	require.NoError(t, err)
	require.Equal(t, defs, back)
	require.Error(t, workflow.Write(&buf), "no workflows is not a file")

	// A callback step, and a wait step, is written without the agent,
	// action and timeout it does not have (the schema refuses them on
	// one), and reads back.
	cb := []workflow.Workflow{{Name: "expense", Steps: []workflow.Step{
		{Name: "approve", Callback: &workflow.Callback{Timeout: workflow.Duration(72 * time.Hour)}},
		{Name: "cool-off", Wait: &workflow.Wait{For: workflow.Duration(24 * time.Hour)}}, // a wait step alike
		{Name: "pay", Agent: "payments", Action: "POST /payments", Timeout: workflow.Duration(time.Minute)},
		// A callback step whose agent hands out its token keeps them all.
		{Name: "confirm", Agent: "payments", Action: "POST /confirmations", Undo: "POST /refunds", Timeout: workflow.Duration(time.Minute),
			Retry: &workflow.Retry{MaximumAttempts: 2}, Callback: &workflow.Callback{Timeout: workflow.Duration(24 * time.Hour)}},
	}}}
	buf.Reset()
	require.NoError(t, workflow.Write(&buf, cb...))
	require.NotContains(t, buf.String(), `"agent": ""`)
	require.NotContains(t, buf.String(), `"timeout": "0s"`)
	back, err = workflow.Parse("written.json", buf.Bytes())
	require.NoError(t, err)
	require.Equal(t, cb, back)
}
