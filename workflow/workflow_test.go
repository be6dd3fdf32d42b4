package workflow_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/workflow"
)

func TestLoadTheExampleFile(t *testing.T) {
	t.Parallel()
	ws, err := workflow.Load("testdata/travel.json")
	require.NoError(t, err)
	require.Len(t, ws, 1)
	trip := ws[0]
	require.Equal(t, "trip", trip.Name)
	require.Len(t, trip.Steps, 3)
	require.Equal(t, workflow.Step{Name: "flight", Agent: "airline", Action: "POST /bookings", Undo: "POST /bookings/cancel",
		Timeout: workflow.Duration(30 * time.Second)}, trip.Steps[0])
	require.Equal(t, 5*time.Minute, trip.Steps[1].WaitLimit.D())
	pay := trip.Steps[2]
	require.Equal(t, 30*time.Minute, pay.TotalLimit.D())
	require.Equal(t, 5, pay.Retry.FailureThreshold)
	require.Equal(t, 2*time.Second, pay.Retry.Backoff.Base.D())
	require.Equal(t, time.Minute, pay.Retry.Backoff.Max.D())

	// What Parse reads, a Go definition can write: the round trip holds.
	b, err := json.Marshal(workflow.File{Workflows: ws})
	require.NoError(t, err)
	again, err := workflow.Parse("again.json", b)
	require.NoError(t, err)
	require.Equal(t, ws, again)
}

// badCases are files Parse must refuse, with the path and a word of the
// reason. The schema test runs them through the JSON Schema too.
var badCases = []struct {
	name, body, path, reason string
	schemaToo                bool // the schema refuses it as well
}{
	{"not JSON", `{"workflows": [`, "", "ends too early", true},
	{"no workflows", `{}`, "workflows", "required", true},
	{"empty list", `{"workflows": []}`, "workflows", "at least one", true},
	{"unknown top field", `{"workflows": [], "extra": 1}`, "extra", `unknown field "extra"`, true},
	{"workflow name", `{"workflows": [{"name": "a b", "steps": [{"name": "s", "agent": "a", "action": "x", "timeout": "1s"}]}]}`, "workflows[0].name", "1-64 characters", true},
	{"no steps", `{"workflows": [{"name": "w", "steps": []}]}`, "workflows[0].steps", "1 to 50 steps", true},
	{"unknown step field", `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "x", "timeout": "1s", "timout": "2s"}]}]}`, "workflows[0].steps[0].timout", `unknown field "timout"`, true},
	{"timeout not a duration", `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "x", "timeout": "30"}]}]}`, "workflows[0].steps[0].timeout", "not a duration", true},
	{"timeout a number", `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "x", "timeout": 30}]}]}`, "workflows[0].steps[0].timeout", "duration string", true},
	{"timeout missing", `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "x"}]}]}`, "workflows[0].steps[0].timeout", "more than 0", true},
	{"timeout too long", `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "x", "timeout": "16m"}]}]}`, "workflows[0].steps[0].timeout", "at most 15m", false},
	{"no agent", `{"workflows": [{"name": "w", "steps": [{"name": "s", "action": "x", "timeout": "1s"}]}]}`, "workflows[0].steps[0].agent", "must name an agent", true},
	{"blank action", `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "  ", "timeout": "1s"}]}]}`, "workflows[0].steps[0].action", "required", true},
	{"total below timeout", `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "x", "timeout": "1m", "totalLimit": "30s"}]}]}`, "workflows[0].steps[0].totalLimit", "at least the timeout", false},
	{"threshold too high", `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "x", "timeout": "1s", "retry": {"failureThreshold": 101}}]}]}`, "workflows[0].steps[0].retry.failureThreshold", "between 1 and 100", true},
	{"attempts too many", `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "x", "timeout": "1s", "retry": {"attempts": 21}}]}]}`, "workflows[0].steps[0].retry.attempts", "between 1 and 20", true},
	{"attempts negative", `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "x", "timeout": "1s", "retry": {"attempts": -1}}]}]}`, "workflows[0].steps[0].retry.attempts", "between 1 and 20", true},
	{"backoff max below base", `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "x", "timeout": "1s", "retry": {"backoff": {"base": "1m", "max": "1s"}}}]}]}`, "workflows[0].steps[0].retry.backoff.max", "below the base", false},
	{"bad backoff duration", `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "x", "timeout": "1s", "retry": {"backoff": {"base": "soon"}}}]}]}`, "workflows[0].steps[0].retry.backoff.base", "not a duration", true},
	{"unknown retry field", `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "x", "timeout": "1s", "retry": {"retries": 3}}]}]}`, "workflows[0].steps[0].retry.retries", `unknown field "retries"`, true},
	{"unknown backoff field", `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "x", "timeout": "1s", "retry": {"backoff": {"min": "1s"}}}]}]}`, "workflows[0].steps[0].retry.backoff.min", `unknown field "min"`, true},
	{"callback with an action and no agent", `{"workflows": [{"name": "w", "steps": [{"name": "s", "action": "x", "callback": {"timeout": "72h"}}]}]}`, "workflows[0].steps[0].action", "a callback step without an agent has none", true},
	{"callback with an undo and no agent", `{"workflows": [{"name": "w", "steps": [{"name": "s", "undo": "x", "callback": {"timeout": "72h"}}]}]}`, "workflows[0].steps[0].undo", "a callback step without an agent has none", true},
	{"callback with a retry and no agent", `{"workflows": [{"name": "w", "steps": [{"name": "s", "retry": {"maximumAttempts": 2}, "callback": {"timeout": "72h"}}]}]}`, "workflows[0].steps[0].retry", "nothing runs it", true},
	{"callback with an agent and no action", `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "timeout": "1s", "callback": {"timeout": "72h"}}]}]}`, "workflows[0].steps[0].action", "required", true},
	{"callback with an agent and a total limit", `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "x", "timeout": "1s", "totalLimit": "1h", "callback": {"timeout": "72h"}}]}]}`, "workflows[0].steps[0].totalLimit", "its deadline is its callback.timeout", true},
	{"callback with an agent and a wait limit", `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "x", "timeout": "1s", "waitLimit": "1h", "callback": {"timeout": "72h"}}]}]}`, "workflows[0].steps[0].waitLimit", "its deadline is its callback.timeout", true},
	{"callback's agent call longer than its wait", `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "x", "timeout": "10m", "callback": {"timeout": "5m"}}]}]}`, "workflows[0].steps[0].timeout", "must fit in the callback's wait", false},
	{"callback timeout too long", `{"workflows": [{"name": "w", "steps": [{"name": "s", "callback": {"timeout": "8761h"}}]}]}`, "workflows[0].steps[0].callback.timeout", "at most 8760h0m0s", false},
	{"callback without a timeout", `{"workflows": [{"name": "w", "steps": [{"name": "s", "callback": {"heartbeat": "1h"}}]}]}`, "workflows[0].steps[0].callback.timeout", "more than 0", true},
	{"callback heartbeat past its timeout", `{"workflows": [{"name": "w", "steps": [{"name": "s", "callback": {"timeout": "1h", "heartbeat": "2h"}}]}]}`, "workflows[0].steps[0].callback.heartbeat", "at most the timeout", false},
	{"duplicate workflow", `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "x", "timeout": "1s"}]}, {"name": "w", "steps": [{"name": "s", "agent": "a", "action": "x", "timeout": "1s"}]}]}`, "workflows[1].name", "already the name of workflows[0]", false},
	{"duplicate step", `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "x", "timeout": "1s"}, {"name": "s", "agent": "a", "action": "y", "timeout": "1s"}]}]}`, "workflows[0].steps[1].name", "already the name of step 0", false},
	{"after unknown step", `{"workflows": [{"name": "w", "steps": [{"name": "a", "agent": "x", "action": "do", "timeout": "1s"}, {"name": "b", "agent": "x", "action": "do", "timeout": "1s", "after": ["zz"]}]}]}`, "workflows[0].steps[1].after[0]", "not a step of this workflow", false},
	{"after itself", `{"workflows": [{"name": "w", "steps": [{"name": "a", "agent": "x", "action": "do", "timeout": "1s"}, {"name": "b", "agent": "x", "action": "do", "timeout": "1s", "after": ["b"]}]}]}`, "workflows[0].steps[1].after[0]", "cannot follow itself", false},
	{"after a cycle", `{"workflows": [{"name": "w", "steps": [{"name": "a", "agent": "x", "action": "do", "timeout": "1s"}, {"name": "b", "agent": "x", "action": "do", "timeout": "1s", "after": ["a", "c"]}, {"name": "c", "agent": "x", "action": "do", "timeout": "1s", "after": ["b"]}]}]}`, "workflows[0].steps[1].after", "cycle: b → c → b", false},
	{"after on the first step", `{"workflows": [{"name": "w", "steps": [{"name": "a", "agent": "x", "action": "do", "timeout": "1s", "after": ["b"]}, {"name": "b", "agent": "x", "action": "do", "timeout": "1s"}]}]}`, "workflows[0].steps[0].after", "first step starts with the order", false},
	{"after named twice", `{"workflows": [{"name": "w", "steps": [{"name": "a", "agent": "x", "action": "do", "timeout": "1s"}, {"name": "b", "agent": "x", "action": "do", "timeout": "1s", "after": ["a", "a"]}]}]}`, "workflows[0].steps[1].after[1]", "named twice", true},
	{"after not a name", `{"workflows": [{"name": "w", "steps": [{"name": "a", "agent": "x", "action": "do", "timeout": "1s"}, {"name": "b", "agent": "x", "action": "do", "timeout": "1s", "after": ["a b"]}]}]}`, "workflows[0].steps[1].after[0]", "not a step", true},
	{"after too many", `{"workflows": [{"name": "w", "steps": [{"name": "s0", "agent": "x", "action": "do", "timeout": "1s"}, {"name": "s1", "agent": "x", "action": "do", "timeout": "1s"}, {"name": "s2", "agent": "x", "action": "do", "timeout": "1s"}, {"name": "s3", "agent": "x", "action": "do", "timeout": "1s"}, {"name": "s4", "agent": "x", "action": "do", "timeout": "1s"}, {"name": "s5", "agent": "x", "action": "do", "timeout": "1s"}, {"name": "s6", "agent": "x", "action": "do", "timeout": "1s"}, {"name": "s7", "agent": "x", "action": "do", "timeout": "1s"}, {"name": "s8", "agent": "x", "action": "do", "timeout": "1s"}, {"name": "s9", "agent": "x", "action": "do", "timeout": "1s"}, {"name": "s10", "agent": "x", "action": "do", "timeout": "1s"}, {"name": "j", "agent": "x", "action": "do", "timeout": "1s", "after": ["s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10"]}]}]}`, "workflows[0].steps[11].after", "follows 11 steps, at most 10", true},
	{"fork too wide", `{"workflows": [{"name": "w", "steps": [{"name": "a", "agent": "x", "action": "do", "timeout": "1s"}, {"name": "b0", "agent": "x", "action": "do", "timeout": "1s", "after": ["a"]}, {"name": "b1", "agent": "x", "action": "do", "timeout": "1s", "after": ["a"]}, {"name": "b2", "agent": "x", "action": "do", "timeout": "1s", "after": ["a"]}, {"name": "b3", "agent": "x", "action": "do", "timeout": "1s", "after": ["a"]}, {"name": "b4", "agent": "x", "action": "do", "timeout": "1s", "after": ["a"]}, {"name": "b5", "agent": "x", "action": "do", "timeout": "1s", "after": ["a"]}, {"name": "b6", "agent": "x", "action": "do", "timeout": "1s", "after": ["a"]}, {"name": "b7", "agent": "x", "action": "do", "timeout": "1s", "after": ["a"]}, {"name": "b8", "agent": "x", "action": "do", "timeout": "1s", "after": ["a"]}, {"name": "b9", "agent": "x", "action": "do", "timeout": "1s", "after": ["a"]}, {"name": "b10", "agent": "x", "action": "do", "timeout": "1s", "after": ["a"]}]}]}`, "workflows[0].steps[0]", "11 steps follow \"a\", at most 10", false},
	// Issue 27 §3: a condition that does not compile, or is not a bool, is
	// refused at load, naming the step.
	{"condition does not compile", `{"workflows": [{"name": "w", "steps": [{"name": "car", "agent": "a", "action": "x", "timeout": "1s", "when": "payload.needsCar =="}]}]}`, "workflows[0].steps[0].when", `step "car": the condition does not compile`, false},
	{"condition not a bool", `{"workflows": [{"name": "w", "steps": [{"name": "car", "agent": "a", "action": "x", "timeout": "1s", "when": "size(payload.items)"}]}]}`, "workflows[0].steps[0].when", "not bool", false},
	{"condition unknown variable", `{"workflows": [{"name": "w", "steps": [{"name": "car", "agent": "a", "action": "x", "timeout": "1s", "when": "input.needsCar"}]}]}`, "workflows[0].steps[0].when", "undeclared reference", false},
	// Issue 27 §2 with §3: a condition on a step that starts with the
	// order of a graph is refused, naming the step; one on a callback step
	// is compiled like any.
	{"condition on a root of a graph", `{"workflows": [{"name": "w", "steps": [{"name": "a", "agent": "x", "action": "do", "timeout": "1s"}, {"name": "b", "agent": "x", "action": "do", "timeout": "1s", "after": [], "when": "payload.b"}]}]}`, "workflows[0].steps[1].when", `step "b" starts with the order in a workflow with branches`, false},
	{"condition on the first step of a graph", `{"workflows": [{"name": "w", "steps": [{"name": "a", "agent": "x", "action": "do", "timeout": "1s", "when": "payload.a"}, {"name": "b", "agent": "x", "action": "do", "timeout": "1s", "after": ["a"]}]}]}`, "workflows[0].steps[0].when", `step "a" starts with the order`, false},
	{"callback condition does not compile", `{"workflows": [{"name": "w", "steps": [{"name": "s", "callback": {"timeout": "1h"}, "when": "payload.x =="}]}]}`, "workflows[0].steps[0].when", `step "s": the condition does not compile`, false},
	// Issue 27 §4: a fan-out's list that does not compile or is not a
	// list, a concurrency out of bounds, a fan-out of a step no agent runs.
	{"forEach items do not compile", `{"workflows": [{"name": "w", "steps": [{"name": "reserve", "agent": "a", "action": "x", "timeout": "1s", "forEach": {"items": "payload.lines["}}]}]}`, "workflows[0].steps[0].forEach.items", `step "reserve": the list does not compile`, false},
	{"forEach items not a list", `{"workflows": [{"name": "w", "steps": [{"name": "reserve", "agent": "a", "action": "x", "timeout": "1s", "forEach": {"items": "size(payload.lines)"}}]}]}`, "workflows[0].steps[0].forEach.items", "not a list", false},
	{"forEach without items", `{"workflows": [{"name": "w", "steps": [{"name": "reserve", "agent": "a", "action": "x", "timeout": "1s", "forEach": {"concurrency": 2}}]}]}`, "workflows[0].steps[0].forEach.items", "the list expression is empty", true},
	{"forEach concurrency too high", `{"workflows": [{"name": "w", "steps": [{"name": "reserve", "agent": "a", "action": "x", "timeout": "1s", "forEach": {"items": "payload.lines", "concurrency": 51}}]}]}`, "workflows[0].steps[0].forEach.concurrency", "between 1 and 50 (0: 10)", true},
	{"forEach concurrency negative", `{"workflows": [{"name": "w", "steps": [{"name": "reserve", "agent": "a", "action": "x", "timeout": "1s", "forEach": {"items": "payload.lines", "concurrency": -1}}]}]}`, "workflows[0].steps[0].forEach.concurrency", "between 1 and 50", true},
	{"forEach unknown field", `{"workflows": [{"name": "w", "steps": [{"name": "reserve", "agent": "a", "action": "x", "timeout": "1s", "forEach": {"items": "payload.lines", "parallel": 3}}]}]}`, "workflows[0].steps[0].forEach.parallel", `unknown field "parallel"`, true},
	{"forEach on a wait step", `{"workflows": [{"name": "w", "steps": [{"name": "pause", "wait": {"for": "1h"}, "forEach": {"items": "payload.lines"}}]}]}`, "workflows[0].steps[0].forEach", "only a step an agent runs may fan out", true},
	{"forEach on a callback step", `{"workflows": [{"name": "w", "steps": [{"name": "approve", "callback": {"timeout": "1h"}, "forEach": {"items": "payload.lines"}}]}]}`, "workflows[0].steps[0].forEach", "only a step an agent runs may fan out", true},
	{"shared step name, other limits", `{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "x", "timeout": "1s"}]}, {"name": "v", "steps": [{"name": "s", "agent": "a", "action": "x", "timeout": "2s"}]}]}`, "workflows[1].steps[0]", "must share them", false},
}

func TestParseRefusesWithFileFieldAndReason(t *testing.T) {
	t.Parallel()
	for _, tc := range badCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := workflow.Parse("wf.json", []byte(tc.body))
			require.Error(t, err)
			require.ErrorIs(t, err, workflow.ErrInvalid)
			var fe *workflow.FieldError
			require.True(t, errors.As(err, &fe), "%v", err)
			require.Equal(t, "wf.json", fe.File)
			require.Equal(t, tc.path, fe.Path, "%v", err)
			require.Contains(t, fe.Reason, tc.reason)
			require.Contains(t, err.Error(), "wf.json: ")
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	err := workflow.Validate(workflow.Workflow{Name: "w", Steps: []workflow.Step{
		{Name: "a", Agent: "x", Action: "POST /a"},                    // no timeout
		{Name: "b", Action: "POST /b", Timeout: workflow.Duration(1)}, // no agent
	}})
	require.ErrorIs(t, err, workflow.ErrInvalid)
	require.Contains(t, err.Error(), "workflows[0].steps[0].timeout")
	require.Contains(t, err.Error(), "workflows[0].steps[1].agent")
	require.NoError(t, workflow.Validate(workflow.Workflow{Name: "w", Steps: []workflow.Step{
		{Name: "a", Agent: "x", Action: "POST /a", Timeout: workflow.Duration(time.Second)},
	}}))
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := workflow.Load("testdata/nope.json")
	require.ErrorIs(t, err, workflow.ErrInvalid)
	require.Contains(t, err.Error(), "testdata/nope.json: cannot read")
}

// A callback step needs only a name and its wait: it parses, and the
// schema takes it.
func TestCallbackStepParses(t *testing.T) {
	t.Parallel()
	ws, err := workflow.Parse("expense.json", []byte(`{"workflows": [{"name": "expense", "steps": [
		{"name": "approve", "callback": {"timeout": "720h", "heartbeat": "24h"}},
		{"name": "pay", "agent": "payments", "action": "POST /payments", "timeout": "30s"}]}]}`))
	require.NoError(t, err)
	require.Equal(t, &workflow.Callback{Timeout: workflow.Duration(720 * time.Hour), Heartbeat: workflow.Duration(24 * time.Hour)}, ws[0].Steps[0].Callback)
}

// A callback step with an agent (its agent starts the work and hands out
// the token) takes an action, an undo, the agent's call's timeout and a
// retry policy beside its wait.
func TestAgentTokenStepParses(t *testing.T) {
	t.Parallel()
	ws, err := workflow.Parse("shop.json", []byte(`{"workflows": [{"name": "shop", "steps": [
		{"name": "pay", "agent": "payments", "action": "POST /payments", "undo": "POST /refunds", "timeout": "30s",
		 "retry": {"maximumAttempts": 2}, "callback": {"timeout": "24h", "heartbeat": "1h"}}]}]}`))
	require.NoError(t, err)
	s := ws[0].Steps[0]
	require.Equal(t, "payments", s.Agent)
	require.Equal(t, "POST /refunds", s.Undo)
	require.Equal(t, workflow.Duration(30*time.Second), s.Timeout)
	require.Equal(t, 2, s.Retry.MaximumAttempts)
	require.Equal(t, &workflow.Callback{Timeout: workflow.Duration(24 * time.Hour), Heartbeat: workflow.Duration(time.Hour)}, s.Callback)
}
