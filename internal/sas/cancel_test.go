package sas

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A cancel of an order with two branches in flight lands on both (each
// is marked, so that neither starts what follows it nor gets a next
// attempt), and on neither step that has settled or waits for them; once
// the order is cancelled its marks are targets too, the unmarked step in
// flight still to be marked.
func TestCancelLandsOnEveryBranchInFlight(t *testing.T) {
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
	got, err := CancelTargets(v)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, steps(got))
	require.Equal(t, []int{1, 2}, steps(Unmarked(got)))

	v.Steps[1].Cancelled = true
	got, err = CancelTargets(v)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, steps(got))
	require.Equal(t, []int{2}, steps(Unmarked(got)), "the mark a first cancel made is not made again")

	v.Steps[1], v.Steps[2] = step(1, Processed), step(2, Processed)
	v.Steps[1].Cancelled = true
	got, err = CancelTargets(v)
	require.NoError(t, err, "a cancelled order's cancel repeats its effects")
	require.Equal(t, []int{1}, steps(got))
	require.Empty(t, Unmarked(got))

	v.Steps[1].Cancelled = false
	_, err = CancelTargets(v)
	require.ErrorIs(t, err, ErrNotRunning, "nothing in flight, nothing cancelled: refused")
}

func steps(rs []StepRecord) []int {
	out := []int{}
	for _, r := range rs {
		out = append(out, r.Step)
	}
	return out
}
