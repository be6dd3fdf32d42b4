package sas_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// An undo's retry policy is part of the definition an order runs on: it
// is stored and read back, and changes the version; a definition without
// one keeps the version it had before undo policies existed.
func TestVersionCarriesTheUndoRetryPolicy(t *testing.T) {
	t.Parallel()
	w := sas.Workflow{Name: "trip", Steps: []sas.StepDef{
		{Name: "hotel", Agent: "hotels", Action: "book", Undo: "cancel", Timeout: 30 * time.Second, MaxFailures: 2},
	}}
	// The encoding from before undo policies: the same bytes, the same version.
	require.JSONEq(t, `{"name":"trip","steps":[{"name":"hotel","agent":"hotels","action":"book","undo":"cancel","timeoutMs":30000,"maxFailures":2}]}`,
		string(sas.EncodeWorkflow(w)))

	u := w
	u.Steps = []sas.StepDef{w.Steps[0]}
	u.Steps[0].UndoRetry = sas.RetryPolicy{MaxAttempts: 40, InitialInterval: 30 * time.Second, Coefficient: 1.5, MaxInterval: 15 * time.Minute}
	u.Steps[0].UndoNonRetryable = []string{"AlreadyRefunded"}
	require.NotEqual(t, w.Version(), u.Version())
	back, err := sas.DecodeWorkflow(sas.EncodeWorkflow(u))
	require.NoError(t, err)
	require.Equal(t, u, back)
	require.Equal(t, u.Version(), back.Version())

	p := back.Steps[0].RetryFor(true, sas.RetryPolicy{}, sas.DefaultUndoRetry)
	require.Equal(t, sas.RetryPolicy{MaxAttempts: 40, InitialInterval: 30 * time.Second, Coefficient: 1.5, MaxInterval: 15 * time.Minute}, p)
	require.Equal(t, sas.DefaultUndoRetry, w.Steps[0].RetryFor(true, sas.RetryPolicy{MaxAttempts: 3}, sas.DefaultUndoRetry),
		"a step without its own: the deployment's undo policy, not the step's forward one")
	require.Equal(t, 2, w.Steps[0].RetryFor(false, sas.RetryPolicy{}, sas.DefaultUndoRetry).MaxAttempts)
	require.Equal(t, []string{"AlreadyRefunded"}, back.Steps[0].NonRetryableFor(true))
}

// A step's condition is part of the definition an order runs on: stored
// and read back, and it changes the version (a definition without one
// keeps its version). The simulator found it dropped on the way: an order
// that outlived a deploy ran a step whose condition could not be evaluated.
func TestVersionCarriesTheCondition(t *testing.T) {
	t.Parallel()
	w := sas.Workflow{Name: "trip", Steps: []sas.StepDef{{Name: "car", Agent: "cars", Action: "book", Timeout: 30 * time.Second}}}
	require.JSONEq(t, `{"name":"trip","steps":[{"name":"car","agent":"cars","action":"book","timeoutMs":30000}]}`, string(sas.EncodeWorkflow(w)))
	u := sas.Workflow{Name: "trip", Steps: []sas.StepDef{w.Steps[0]}}
	u.Steps[0].When = "payload.needsCar"
	require.NotEqual(t, w.Version(), u.Version())
	back, err := sas.DecodeWorkflow(sas.EncodeWorkflow(u))
	require.NoError(t, err)
	require.Equal(t, u, back)
}
