package registry_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/workflow"
)

func TestDefault(t *testing.T) {
	t.Parallel()
	reg, err := registry.Default(20 * time.Second)
	require.NoError(t, err)
	require.Len(t, reg, 2)

	pay := reg[registry.Payment]
	require.Equal(t, []string{"charge"}, pay.StepNames())
	require.Equal(t, sas.StepDef{Name: "charge", Agent: "payments", Action: "POST /payments", Undo: "POST /refunds", Timeout: 20 * time.Second}, pay.Steps[0])

	ord := reg[registry.Order]
	require.Equal(t, []string{"reserve", "charge", "ship"}, ord.StepNames())
	require.Equal(t, "POST /reservations/cancel", ord.Steps[0].Undo)
	require.Equal(t, "POST /refunds", ord.Steps[1].Undo)
	require.Empty(t, ord.Steps[2].Undo, "shipping is not undone")
	for _, d := range ord.Steps {
		require.Equal(t, registry.PaymentsAgent, d.Agent)
		require.Equal(t, 20*time.Second, d.Timeout)
	}
}

func TestDefaultNeedsATimeout(t *testing.T) {
	t.Parallel()
	_, err := registry.Default(0)
	require.ErrorIs(t, err, sas.ErrInvalid)
}

func TestLoadFromAFile(t *testing.T) {
	t.Parallel()
	reg, err := registry.Load("../../workflow/testdata/travel.json", time.Second)
	require.NoError(t, err)
	require.Len(t, reg, 1)
	trip := reg["trip"]
	require.Equal(t, []string{"flight", "hotel", "pay"}, trip.StepNames())
	require.Equal(t, sas.StepDef{Name: "pay", Agent: "payments", Action: "POST /payments", Timeout: 20 * time.Second,
		TotalLimit: 30 * time.Minute, MaxFailures: 5, BaseBackoff: 2 * time.Second, MaxBackoff: time.Minute, Tries: 4}, trip.Steps[2])
	limits, err := reg.Limits()
	require.NoError(t, err)
	require.Equal(t, sas.StepLimits{Timeout: 20 * time.Second, TotalLimit: 30 * time.Minute, MaxFailures: 5,
		BaseBackoff: 2 * time.Second, MaxBackoff: time.Minute}, limits["pay"], "the supervisor gets the step's retry policy")
	require.Equal(t, 5*time.Minute, limits["hotel"].WaitLimit)

	// No file: the reference workflows.
	reg, err = registry.Load("", time.Second)
	require.NoError(t, err)
	require.True(t, reg.Has(registry.Payment))
}

func TestLoadRefusesABadFileAtStartUp(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "workflows.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"workflows": [{"name": "w", "steps": [{"name": "s", "agent": "a", "action": "POST /s", "timeout": "-1s"}]}]}`), 0o600))
	_, err := registry.Load(path, time.Second)
	require.ErrorIs(t, err, workflow.ErrInvalid)
	require.Contains(t, err.Error(), path+": workflows[0].steps[0].timeout: -1s: must be more than 0")
}

// A step's After becomes the indices of the steps it follows; one that
// names the step before it (the default, spelt out) means and versions the
// same as one that names none, so every definition that loaded before
// branches loads unchanged.
func TestAfterBecomesTheGraph(t *testing.T) {
	t.Parallel()
	step := func(name string, after ...string) workflow.Step {
		return workflow.Step{Name: name, Agent: "x", Action: "POST /" + name, Undo: "POST /un" + name, Timeout: workflow.Duration(time.Second), After: after}
	}
	line := workflow.Workflow{Name: "line", Steps: []workflow.Step{step("a"), step("b"), step("c")}}
	spelt := workflow.Workflow{Name: "line", Steps: []workflow.Step{step("a"), step("b", "a"), step("c", "b")}}
	r1, err := registry.FromDefinitions([]workflow.Workflow{line})
	require.NoError(t, err)
	r2, err := registry.FromDefinitions([]workflow.Workflow{spelt})
	require.NoError(t, err)
	require.False(t, r2["line"].Graph())
	require.Equal(t, r1["line"].Version(), r2["line"].Version(), "the default spelt out is the same version")

	diamond := workflow.Workflow{Name: "d", Steps: []workflow.Step{step("a"), step("b", "a"), step("c", "a"), step("d", "c", "b")}}
	r, err := registry.FromDefinitions([]workflow.Workflow{diamond})
	require.NoError(t, err)
	w := r["d"]
	require.True(t, w.Graph())
	require.Equal(t, [][]int{{}, {0}, {0}, {2, 1}}, w.After())
	require.Equal(t, []int{1, 2}, w.Succs(0))
	require.Equal(t, []int{0, 1, 2}, w.Ancestors(3))
	require.NotEqual(t, r1["line"].Version(), w.Version())
	back, err := sas.DecodeWorkflow(sas.EncodeWorkflow(w))
	require.NoError(t, err)
	require.Equal(t, w, back, "a stored definition keeps its graph")
	require.Equal(t, w.Version(), back.Version())
}

// The public package states the longest callback wait the domain takes.
func TestMaxCallbackTimeoutAgrees(t *testing.T) {
	require.Equal(t, sas.MaxCallbackTimeout, workflow.MaxCallbackTimeout)
}

// The public package states the fan-out limits the domain takes, and a
// fan-out's element keys stay past every step's.
func TestForEachLimitsAgree(t *testing.T) {
	require.Equal(t, sas.MaxForEach, workflow.MaxForEach)
	require.Equal(t, sas.MaxConcurrency, workflow.MaxConcurrency)
	require.Equal(t, sas.DefaultConcurrency, workflow.DefaultConcurrency)
	require.Less(t, workflow.MaxSteps, sas.ElementBase)
	require.Less(t, workflow.MaxForEach, sas.ElementBase)
}

// A fan-out reaches the registry as one: its list and window, which the
// scheduler runs an element at a time, never as one plain request.
func TestAFanOutIsRegisteredAsOne(t *testing.T) {
	reg, err := registry.FromDefinitions([]workflow.Workflow{{Name: "order", Steps: []workflow.Step{{Name: "reserve", Agent: "stock",
		Action: "POST /holds", Timeout: workflow.Duration(time.Second), ForEach: &workflow.ForEach{Items: "payload.lines", Concurrency: 4}}}}})
	require.NoError(t, err)
	w, ok := reg["order"]
	require.True(t, ok)
	require.Equal(t, &sas.ForEach{Items: "payload.lines", Concurrency: 4}, w.Steps[0].ForEach)
}
