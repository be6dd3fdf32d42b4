package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// testCompleteSkips: a completion settles the steps its order passes over
// (their conditions: sas.Skip) in its own write: Skipped, out of the index,
// never claimed; or, for one whose condition could not be evaluated, in
// Error, failed by the condition, indexed as every Error. Each skip is
// fenced as a claim of a step never claimed, and one that loses makes the
// whole write lose: nothing is written.
func testCompleteSkips(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.New(t).Store
	submit(t, s, "o-skip", 5)
	k := func(i int) sas.StepKey { return key("o-skip", i) }
	claim(t, s, k(0), 0, "a", T0, at(time.Minute))
	recs, err := s.Complete(ctx, sas.CompleteParams{Key: k(0), Owner: "a", Attempt: 1, Now: at(time.Second),
		Skip: []sas.Skip{{Step: 1, Reason: "skipped: payload.car is false"}, {Step: 2, Reason: "skipped: payload.hotel is false"}},
		Next: &sas.ClaimParams{Key: k(3), Owner: "a", Now: at(time.Second), CompleteBy: at(time.Minute)}})
	require.NoError(t, err)
	require.Len(t, recs, 4, "the completed, the claimed, the skipped")
	require.Equal(t, sas.Processed, recs[0].ProcessState)
	require.Equal(t, 3, recs[1].Step)
	require.Equal(t, sas.Processing, recs[1].ProcessState)
	for i, r := range recs[2:] {
		require.Equal(t, i+1, r.Step)
		require.Equal(t, sas.Skipped, r.ProcessState)
		require.Zero(t, r.Attempt)
		require.Empty(t, r.LockedBy)
		_, indexed := r.Indexed()
		require.False(t, indexed)
	}
	v := get(t, s, "o-skip")
	require.Equal(t, "skipped: payload.car is false", v.Steps[1].LastHistoryReason())
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Skipped, sas.Skipped, sas.Processing, sas.Pending}, states(v))
	for _, st := range []sas.ProcessState{sas.Pending, sas.Processing, sas.Error} {
		page, err := s.ListByState(ctx, sas.ListByStateParams{State: st})
		require.NoError(t, err)
		for _, r := range page.Records {
			if r.OrderID == "o-skip" {
				require.Equal(t, 3, r.Step, "only the claimed step is indexed (%s)", st)
			}
		}
	}

	// The last step's condition could not be evaluated: Error, by the
	// condition, with no next claim.
	_, err = s.Complete(ctx, sas.CompleteParams{Key: k(3), Owner: "a", Attempt: 1, Now: at(2 * time.Second),
		Skip: []sas.Skip{{Step: 4, Failed: true, Reason: "ConditionFailed: no such key: hours"}}})
	require.NoError(t, err)
	r, err := s.GetStep(ctx, k(4))
	require.NoError(t, err)
	require.Equal(t, sas.Error, r.ProcessState)
	require.Equal(t, sas.ByCondition, r.FailedBy)
	require.True(t, r.Refused)
	require.Equal(t, "ConditionFailed: no such key: hours", r.LastError)
	require.Zero(t, r.Attempt)
	page, err := s.ListByState(ctx, sas.ListByStateParams{State: sas.Error})
	require.NoError(t, err)
	found := false
	for _, e := range page.Records {
		found = found || e.Key() == k(4)
	}
	require.True(t, found, "a step failed by its condition is listed in Error for an operator")
	get(t, s, "o-skip") // its history is legal

	// A skip of a step that was claimed loses, and nothing of the write is made.
	submit(t, s, "o-skip2", 3)
	k2 := func(i int) sas.StepKey { return key("o-skip2", i) }
	claim(t, s, k2(0), 0, "a", T0, at(time.Minute))
	_, err = s.Complete(ctx, sas.CompleteParams{Key: k2(0), Owner: "a", Attempt: 1, Now: at(time.Second),
		Next: &sas.ClaimParams{Key: k2(1), Owner: "a", Now: at(time.Second), CompleteBy: at(time.Minute)}})
	require.NoError(t, err)
	claim(t, s, k2(2), 0, "b", at(time.Second), at(time.Minute)) // not as the protocol does: to test the fence
	_, err = s.Complete(ctx, sas.CompleteParams{Key: k2(1), Owner: "a", Attempt: 1, Now: at(2 * time.Second),
		Skip: []sas.Skip{{Step: 2, Reason: "skipped"}}})
	re := requireRace(t, err)
	require.Equal(t, k2(2), re.Key, "the skip's fence lost")
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processing, sas.Processing}, states(get(t, s, "o-skip2")), "nothing written")

	// Skips no order could take are invalid, whatever the records.
	for _, bad := range []sas.CompleteParams{
		{Key: k2(1), Owner: "a", Attempt: 1, Now: at(3 * time.Second), Skip: []sas.Skip{{Step: 1}}},
		{Key: k2(1), Owner: "a", Attempt: 1, Now: at(3 * time.Second), Skip: []sas.Skip{{Step: 2, Failed: true}},
			Next: &sas.ClaimParams{Key: k2(2), Owner: "a", Now: at(3 * time.Second), CompleteBy: at(time.Minute)}},
		{Key: k2(1), Owner: "a", Attempt: 1, Now: at(3 * time.Second), Compensation: true, Skip: []sas.Skip{{Step: 2}}},
	} {
		_, err := s.Complete(ctx, bad)
		require.ErrorIs(t, err, sas.ErrInvalid, "%+v", bad.Skip)
	}
}

// testSubmitSkips: a submission creates the first steps its conditions
// pass over settled, and claims the first step to run.
func testSubmitSkips(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.New(t).Store
	res, err := s.Submit(ctx, sas.SubmitParams{Order: order("o-sub-skip", 3), Now: T0, PickupBy: at(time.Minute),
		Skip:  []sas.Skip{{Step: 0, Reason: "skipped: payload.visa is false"}},
		Claim: &sas.ClaimParams{Owner: "a", Now: T0, CompleteBy: at(30 * time.Second)}})
	require.NoError(t, err)
	require.True(t, res.Created)
	require.Equal(t, []sas.ProcessState{sas.Skipped, sas.Processing, sas.Pending}, states(res.View))
	v := get(t, s, "o-sub-skip")
	require.Equal(t, states(res.View), states(v), "what the submission returns is what a read returns")
	require.Equal(t, 1, v.Steps[1].Attempt)

	res, err = s.Submit(ctx, sas.SubmitParams{Order: order("o-sub-fail", 2), Now: T0, PickupBy: at(time.Minute),
		Skip:  []sas.Skip{{Step: 0, Reason: "skipped"}, {Step: 1, Failed: true, Reason: "ConditionFailed: not a bool"}},
		Claim: &sas.ClaimParams{Owner: "a", Now: T0, CompleteBy: at(30 * time.Second)}})
	require.NoError(t, err)
	v = get(t, s, "o-sub-fail")
	require.Equal(t, []sas.ProcessState{sas.Skipped, sas.Error}, states(v))
	require.Equal(t, sas.ByCondition, v.Steps[1].FailedBy)
	require.Equal(t, sas.Error, v.State())
}

func states(v sas.OrderView) []sas.ProcessState {
	out := make([]sas.ProcessState, len(v.Steps))
	for i, r := range v.Steps {
		out[i] = r.ProcessState
	}
	return out
}
