package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// testWritesReturnWholeRecords: every write returns the whole record it
// left, every field equal to what a GetStep then reads. The walk is issue
// 16's hole 1: reserve refused, resubmitted (generation 1), done; charge
// done; ship fails; completing charge's undo claims reserve's undo in the
// same write, and the record returned for it must carry generation 1, or
// the undo goes out under the generation-0 key and the g1 effect is never
// undone. DynamoDB's Complete with Next once rebuilt that record from what
// the write set.
func testWritesReturnWholeRecords(t *testing.T, h Harness) {
	s := h.New(t).Store
	res, err := s.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: "o-whole", Workflow: "trip", Steps: []string{"reserve", "charge", "ship"}},
		Now: T0.Add(time.Microsecond), PickupBy: at(time.Minute)}) // a clock finer than the store's
	require.NoError(t, err)
	requireWhole(t, s, res.View.Steps...)
	reserve, charge, ship := key("o-whole", 0), key("o-whole", 1), key("o-whole", 2)
	one := func(r sas.StepRecord, err error) sas.StepRecord {
		t.Helper()
		require.NoError(t, err)
		requireWhole(t, s, r)
		return r
	}
	many := func(rs []sas.StepRecord, err error) []sas.StepRecord {
		t.Helper()
		require.NoError(t, err)
		requireWhole(t, s, rs...)
		return rs
	}

	one(s.Claim(ctx, sas.ClaimParams{Key: reserve, Owner: "a", Now: at(time.Second), CompleteBy: at(time.Minute)}))
	one(s.Fail(ctx, sas.FailParams{Key: reserve, Owner: "a", Attempt: 1, Now: at(2 * time.Second), Reason: "refused"}))
	r := one(s.Resubmit(ctx, sas.ResubmitParams{Key: reserve, Attempt: 1, Now: at(3 * time.Second), PickupBy: at(time.Minute), Actor: "op"}))
	require.Equal(t, 1, r.Generation, "a refused step with no effect is resubmitted under a new generation")
	require.Equal(t, 2, r.Attempt, "a resubmit moves the attempt on")
	one(s.Claim(ctx, sas.ClaimParams{Key: reserve, Attempt: 2, Owner: "a", Now: at(4 * time.Second), CompleteBy: at(time.Minute)}))
	rs := many(s.Complete(ctx, sas.CompleteParams{Key: reserve, Owner: "a", Attempt: 3, Now: at(5 * time.Second),
		Next: &sas.ClaimParams{Key: charge, Owner: "b", Now: at(5 * time.Second), CompleteBy: at(time.Minute)}}))
	require.Equal(t, 1, rs[0].Generation)
	many(s.Complete(ctx, sas.CompleteParams{Key: charge, Owner: "b", Attempt: 1, Now: at(6 * time.Second),
		Next: &sas.ClaimParams{Key: ship, Owner: "c", Now: at(6 * time.Second), CompleteBy: at(time.Minute)}}))
	one(s.Fail(ctx, sas.FailParams{Key: ship, Owner: "c", Attempt: 1, Now: at(7 * time.Second), Reason: "no address"}))
	one(s.Claim(ctx, sas.ClaimParams{Key: charge, From: sas.Processed, Attempt: 1, Owner: "d", Now: at(8 * time.Second), CompleteBy: at(time.Minute)}))
	rs = many(s.Complete(ctx, sas.CompleteParams{Key: charge, Owner: "d", Attempt: 2, Now: at(9 * time.Second), Compensation: true,
		Next: &sas.ClaimParams{Key: reserve, From: sas.Processed, Attempt: 3, Owner: "d", Now: at(9 * time.Second), CompleteBy: at(time.Minute)}}))
	require.Equal(t, sas.Compensating, rs[1].ProcessState)
	require.Equal(t, 1, rs[1].Generation, "reserve's undo must go out under the generation that took effect")

	// The supervisor's writes on the undo, and settling what it owes.
	now := at(time.Minute)
	one(s.Wait(ctx, sas.WaitParams{Key: reserve, From: sas.Compensating, Owner: "d", Attempt: 4, DueAt: at(time.Minute), Now: now,
		Until: now.Add(time.Minute), Actor: "sup", Reason: "queue busy"}))
	now = now.Add(time.Minute)
	one(s.Rescue(ctx, sas.RescueParams{Key: reserve, From: sas.Compensating, Attempt: 4, Now: now, PickupBy: now.Add(time.Minute), Actor: "sup", Reason: "stuck"}))
	now = now.Add(time.Minute)
	r = one(s.GiveUp(ctx, sas.GiveUpParams{Key: reserve, From: sas.Compensating, Attempt: 4, Now: now, Actor: "sup", Reason: "threshold"}))
	require.Equal(t, 1, r.Generation)
	one(s.Settle(ctx, sas.SettleParams{Key: reserve, State: sas.CompensationFailed, Attempt: 4}))

	// A late done noted on a refused step.
	submit(t, s, "o-whole-note", 1)
	k := key("o-whole-note", 0)
	one(s.Claim(ctx, sas.ClaimParams{Key: k, Owner: "a", Now: T0, CompleteBy: at(time.Minute)}))
	one(s.Fail(ctx, sas.FailParams{Key: k, Owner: "a", Attempt: 1, Now: at(time.Second), Reason: "refused"}))
	r = one(s.NoteEffect(ctx, sas.NoteEffectParams{Key: k, State: sas.Error, Now: at(2 * time.Second), Actor: "sched", Attempt: 1}))
	require.True(t, r.UndoOwed)
}

// requireWhole checks each record equals the stored one, every field.
func requireWhole(t *testing.T, s sas.StateStore, recs ...sas.StepRecord) {
	t.Helper()
	for _, r := range recs {
		stored, err := s.GetStep(ctx, r.Key())
		require.NoError(t, err)
		require.Equal(t, stored, r, "the record a write returns for %s is the whole record stored", r.Key())
	}
}
