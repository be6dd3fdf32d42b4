package workflow_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/workflow"
)

// A graph loads: three branches after a first step, joined by a last one;
// the first step may say it follows nothing. (What is refused, and why, is
// in badCases.)
func TestBranchesLoad(t *testing.T) {
	t.Parallel()
	step := func(name string, after ...string) workflow.Step {
		return workflow.Step{Name: name, Agent: "x", Action: "POST /" + name, Timeout: workflow.Duration(time.Second), After: after}
	}
	trip := workflow.Workflow{Name: "trip", Steps: []workflow.Step{
		{Name: "quote", Agent: "x", Action: "POST /quote", Timeout: workflow.Duration(time.Second), After: []string{}},
		step("flight", "quote"), step("hotel", "quote"), step("car", "quote"),
		step("pay", "flight", "hotel", "car"),
	}}
	require.NoError(t, workflow.Validate(trip))
	b := []byte(`{"workflows": [{"name": "trip", "steps": [
	  {"name": "quote", "agent": "x", "action": "do", "timeout": "1s"},
	  {"name": "flight", "agent": "x", "action": "do", "timeout": "1s", "after": ["quote"]},
	  {"name": "hotel", "agent": "x", "action": "do", "timeout": "1s", "after": ["quote"]},
	  {"name": "pay", "agent": "x", "action": "do", "timeout": "1s", "after": ["flight", "hotel"]}]}]}`)
	f, err := workflow.Parse("wf.json", b)
	require.NoError(t, err)
	require.Equal(t, []string{"flight", "hotel"}, f[0].Steps[3].After)
	require.Equal(t, []string{"quote"}, f[0].Steps[1].After)
}
