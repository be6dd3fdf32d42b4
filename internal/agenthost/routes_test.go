package agenthost_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/agenthost"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
)

func TestRoutesFromDefaultWorkflows(t *testing.T) {
	t.Parallel()
	reg, err := registry.Default(time.Minute)
	require.NoError(t, err)
	routes, err := agenthost.RoutesFromRegistry(reg, registry.PaymentsAgent)
	require.NoError(t, err)
	require.Equal(t, agenthost.Routes{
		"reserve": {Action: "POST /reservations", Undo: "POST /reservations/cancel"},
		"charge":  {Action: "POST /payments", Undo: "POST /refunds"},
		"ship":    {Action: "POST /shipments"},
	}, routes)

	none, err := agenthost.RoutesFromRegistry(reg, "inventory")
	require.NoError(t, err)
	require.Empty(t, none)
}

func TestRoutesRefuseAnAmbiguousStepName(t *testing.T) {
	t.Parallel()
	step := func(action string) sas.StepDef {
		return sas.StepDef{Name: "charge", Agent: "payments", Action: action, Undo: "POST /refunds", Timeout: time.Second}
	}
	reg, err := sas.NewRegistry(
		sas.Workflow{Name: "a", Steps: []sas.StepDef{step("POST /payments")}},
		sas.Workflow{Name: "b", Steps: []sas.StepDef{step("POST /charges")}},
	)
	require.NoError(t, err)
	_, err = agenthost.RoutesFromRegistry(reg, "payments")
	require.ErrorIs(t, err, sas.ErrInvalid)
	require.ErrorContains(t, err, `step "charge"`)

	// The same definition in two workflows is fine.
	reg, err = sas.NewRegistry(
		sas.Workflow{Name: "a", Steps: []sas.StepDef{step("POST /payments")}},
		sas.Workflow{Name: "b", Steps: []sas.StepDef{step("POST /payments")}},
	)
	require.NoError(t, err)
	_, err = agenthost.RoutesFromRegistry(reg, "payments")
	require.NoError(t, err)
}
