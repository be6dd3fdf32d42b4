package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/workflows"
)

func TestDefault(t *testing.T) {
	t.Parallel()
	reg, err := workflows.Default(20 * time.Second)
	require.NoError(t, err)
	require.Len(t, reg, 2)

	pay := reg[workflows.Payment]
	require.Equal(t, []string{"charge"}, pay.StepNames())
	require.Equal(t, sas.StepDef{Name: "charge", Agent: "payments", Action: "POST /payments", Undo: "POST /refunds", Timeout: 20 * time.Second}, pay.Steps[0])

	ord := reg[workflows.Order]
	require.Equal(t, []string{"reserve", "charge", "ship"}, ord.StepNames())
	require.Equal(t, "POST /reservations/cancel", ord.Steps[0].Undo)
	require.Equal(t, "POST /refunds", ord.Steps[1].Undo)
	require.Empty(t, ord.Steps[2].Undo, "shipping is not undone")
	for _, d := range ord.Steps {
		require.Equal(t, workflows.PaymentsAgent, d.Agent)
		require.Equal(t, 20*time.Second, d.Timeout)
	}
}

func TestDefaultNeedsATimeout(t *testing.T) {
	t.Parallel()
	_, err := workflows.Default(0)
	require.ErrorIs(t, err, sas.ErrInvalid)
}
