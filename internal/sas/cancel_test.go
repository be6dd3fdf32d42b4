package sas

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A cancel of an order with two branches in flight is refused, with the
// reason, rather than marking one step while the other's completion goes
// on to claim what follows it; with one left it lands on that one.
func TestCancelRefusesTwoBranchesInFlight(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	step := func(i int, st ProcessState) StepRecord {
		r := StepRecord{OrderID: "o-b", Step: i, StepName: fmt.Sprintf("s%d", i), ProcessState: st}
		if st == Processing {
			r.Attempt, r.LockedBy, r.CompleteBy, r.DueAt = 1, "sched", at, at
		}
		return r
	}
	v := OrderView{Order: Order{OrderID: "o-b"}, Steps: []StepRecord{step(0, Processed), step(1, Processing), step(2, Processing), step(3, Pending)}}
	_, err := CancelTarget(v)
	require.ErrorIs(t, err, ErrNotRunning)
	require.Contains(t, err.Error(), "2 branches are in flight at once (steps 1 (s1), 2 (s2))")

	v.Steps[2] = step(2, Processed)
	r, err := CancelTarget(v)
	require.NoError(t, err)
	require.Equal(t, 1, r.Step)
}
