package sas_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// A callback step may have an agent (its agent hands out the token): it
// is then neither agentless nor refused, and routes to its agent; without
// an agent it takes no action or undo, and an agent's call must fit in the
// wait.
func TestACallbackStepMayHaveAnAgent(t *testing.T) {
	t.Parallel()
	cb := &sas.Callback{Timeout: time.Hour}
	pay := sas.StepDef{Name: "pay", Agent: "payments", Action: "POST /payments", Undo: "POST /refunds", Timeout: time.Minute, Callback: cb}
	_, err := sas.NewRegistry(sas.Workflow{Name: "w", Steps: []sas.StepDef{pay}})
	require.NoError(t, err)
	require.True(t, pay.AgentToken())
	require.True(t, pay.Outside())
	require.False(t, pay.Agentless())
	approve := sas.StepDef{Name: "approve", Callback: cb}
	require.False(t, approve.AgentToken())
	require.True(t, approve.Agentless())

	for name, bad := range map[string]sas.StepDef{
		"an action without an agent":  {Name: "s", Action: "x", Callback: cb},
		"an undo without an agent":    {Name: "s", Undo: "x", Callback: cb},
		"a call longer than the wait": {Name: "s", Agent: "a", Action: "x", Timeout: 2 * time.Hour, Callback: cb},
	} {
		_, err := sas.NewRegistry(sas.Workflow{Name: "w", Steps: []sas.StepDef{bad}})
		require.ErrorIs(t, err, sas.ErrInvalid, name)
	}
}
