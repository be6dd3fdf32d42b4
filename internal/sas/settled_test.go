package sas

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSettledFinalStates holds the "nothing will move this order" predicate
// (the local runs' WaitTerminal, the demo's summary, sasdev's watch) to the
// final states the integration suite reaches.
func TestSettledFinalStates(t *testing.T) {
	t.Parallel()
	view := func(states ...ProcessState) OrderView {
		var v OrderView
		for i, s := range states {
			v.Steps = append(v.Steps, StepRecord{Step: i, ProcessState: s})
		}
		return v
	}
	for _, tc := range []struct {
		steps   []ProcessState
		settled bool
	}{
		{[]ProcessState{Processed, Processed, Processed}, true},
		{[]ProcessState{Compensated, Error, Pending}, true},
		{[]ProcessState{Compensated, Compensated, Processed}, true},
		// A failed undo stops the chain: the reservation waits for an operator.
		{[]ProcessState{Processed, CompensationFailed, Error}, true},
		// A failed step with completed work before it: its undo is on its way.
		{[]ProcessState{Processed, Error, Pending}, false},
		{[]ProcessState{Processed, Compensating, Error}, false},
		{[]ProcessState{Processed, Pending, Pending}, false},
	} {
		require.Equal(t, tc.settled, view(tc.steps...).Settled(), "%v", tc.steps)
	}
}
