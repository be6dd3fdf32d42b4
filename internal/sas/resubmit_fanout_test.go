package sas_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// A fan-out that started and failed is not resubmitted: its elements ran
// under their own keys and it does not start twice, so the step would wait
// for ever (the simulator's seed 337 under -fanout-failures: an operator's
// resubmit left the order Processing for good). One that failed before it
// started (its list could not be evaluated) still may be.
func TestAStartedFanOutIsNotResubmitted(t *testing.T) {
	t.Parallel()
	step := sas.StepRecord{OrderID: "o-1", Step: 1, ProcessState: sas.Error, Attempt: 1, LastError: "refused"}
	v := sas.OrderView{Order: sas.Order{OrderID: "o-1"}, Steps: []sas.StepRecord{{OrderID: "o-1", Step: 0, ProcessState: sas.Processed, Attempt: 1}, step}}
	require.NoError(t, sas.CanResubmit(v, 1), "a fan-out whose list failed never started")
	v.Steps[1].ForEachCount = 24
	err := sas.CanResubmit(v, 1)
	require.ErrorIs(t, err, sas.ErrInvalid)
	require.ErrorContains(t, err, "fan-out whose 24 elements started")
}
