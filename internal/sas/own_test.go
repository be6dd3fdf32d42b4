package sas

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A claim whose answer was lost is still ours when a cancel marked the
// step after it (the mark moves no state, attempt or holder); a write of
// someone else's after it, or a mark alone, is not.
func TestOwnWriteSeesThroughACancelsMark(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_700_000_000_000).UTC()
	r := StepRecord{OrderID: "o", Step: 1, ProcessState: Pending}
	claimed, err := Claim(r, ClaimParams{Key: r.Key(), Owner: "sched-a", Now: now, CompleteBy: now.Add(time.Minute)})
	require.NoError(t, err)
	marked, err := CancelStep(claimed, CancelParams{Key: r.Key(), From: Processing, Attempt: 1, Now: now.Add(time.Second), Actor: "submitter:X"})
	require.NoError(t, err)

	got, ok := OwnWrite(&RaceError{Current: &marked}, "sched-a", now, Processing, 1)
	require.True(t, ok, "our claim, a mark after it")
	require.True(t, got.Cancelled, "the record as it is now")
	_, ok = OwnWrite(&RaceError{Current: &marked}, "sched-b", now, Processing, 1)
	require.False(t, ok, "another's claim")

	failed, err := Fail(marked, FailParams{Key: r.Key(), Owner: "sched-a", Attempt: 1, Now: now.Add(2 * time.Second), Reason: "x"})
	require.NoError(t, err)
	_, ok = OwnWrite(&RaceError{Current: &failed}, "sched-a", now, Processing, 1)
	require.False(t, ok, "a transition after the mark: the record moved on")
}
