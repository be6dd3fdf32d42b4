package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// testCompensation walks an order through its undo: step 0 done, step 1
// failed; the scheduler undoes step 0 as a supervised step of its own.
func testCompensation(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-comp", 2)
	k0, k1 := key("o-comp", 0), key("o-comp", 1)
	claim(t, s, k0, 0, "a", T0, at(time.Minute))
	_, err := s.Complete(ctx, sas.CompleteParams{Key: k0, Owner: "a", Attempt: 1, Now: at(time.Second),
		Next: &sas.ClaimParams{Key: k1, Owner: "a", Now: at(time.Second), CompleteBy: at(time.Minute)}})
	require.NoError(t, err)
	_, err = s.Fail(ctx, sas.FailParams{Key: k1, Owner: "a", Attempt: 1, Now: at(2 * time.Second), Reason: "out of stock"})
	require.NoError(t, err)

	// A forward claim of a done step is refused; an undo claim is fenced too.
	_, err = s.Claim(ctx, sas.ClaimParams{Key: k0, Attempt: 1, Owner: "b", Now: at(3 * time.Second), CompleteBy: at(time.Minute)})
	requireRace(t, err)
	_, err = s.Claim(ctx, sas.ClaimParams{Key: k0, From: sas.Processed, Attempt: 0, Owner: "b", Now: at(3 * time.Second), CompleteBy: at(time.Minute)})
	requireRace(t, err)
	r, err := s.Claim(ctx, sas.ClaimParams{Key: k0, From: sas.Processed, Attempt: 1, Owner: "b", Now: at(3 * time.Second), CompleteBy: at(time.Minute),
		RequestedBy: "sender:AROAOPERATOR:alice", Why: "customer cancelled"})
	require.NoError(t, err)
	require.Equal(t, sas.Compensating, r.ProcessState)
	require.Equal(t, 2, r.Attempt)
	// Who asked for the compensation, and why, is in the claim's entry
	// (the lease is the claimer's).
	last := r.History[len(r.History)-1]
	require.Equal(t, "compensation claimed, requested by sender:AROAOPERATOR:alice: customer cancelled", last.Reason)
	require.Equal(t, "b", last.Actor)

	// The undo's agent hangs: the supervisor finds it like any stuck step and
	// hands it back without a holder, still Compensating.
	due, err := s.FindDue(ctx, sas.FindDueParams{State: sas.Compensating, Now: at(2 * time.Minute)})
	require.NoError(t, err)
	require.Len(t, due.Records, 1)
	r, err = s.Rescue(ctx, sas.RescueParams{Key: k0, From: sas.Compensating, Attempt: 2, Now: at(2 * time.Minute), PickupBy: at(3 * time.Minute), Actor: "sup", Reason: "undo stuck"})
	require.NoError(t, err)
	require.Equal(t, sas.Compensating, r.ProcessState)
	require.Empty(t, r.LockedBy)
	require.Equal(t, 1, r.FailureCount)
	// The late reply of the hung undo loses.
	_, err = s.Complete(ctx, sas.CompleteParams{Key: k0, Owner: "b", Attempt: 2, Now: at(2 * time.Minute), Compensation: true})
	requireRace(t, err)
	r, err = s.Claim(ctx, sas.ClaimParams{Key: k0, From: sas.Compensating, Attempt: 2, Owner: "c", Now: at(2 * time.Minute), CompleteBy: at(3 * time.Minute)})
	require.NoError(t, err)
	require.Equal(t, 1, r.FailureCount, "re-claiming an undo keeps its failure count")
	recs, err := s.Complete(ctx, sas.CompleteParams{Key: k0, Owner: "c", Attempt: 3, Now: at(150 * time.Second), Compensation: true})
	require.NoError(t, err)
	require.Equal(t, sas.Compensated, recs[0].ProcessState)
	v := get(t, s, "o-comp")
	require.Equal(t, sas.Compensated, v.Steps[0].ProcessState)
	require.Equal(t, sas.Error, v.Steps[1].ProcessState)
}

func testCompensationFails(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-cf2", 2)
	k0, k1 := key("o-cf2", 0), key("o-cf2", 1)
	claim(t, s, k0, 0, "a", T0, at(time.Minute))
	_, err := s.Complete(ctx, sas.CompleteParams{Key: k0, Owner: "a", Attempt: 1, Now: at(time.Second)})
	require.NoError(t, err)
	claim(t, s, k1, 0, "a", T0, at(time.Minute))
	// Undo step 1 (given up) and then step 0, atomically chained.
	_, err = s.Fail(ctx, sas.FailParams{Key: k1, Owner: "a", Attempt: 1, Now: at(2 * time.Second), Reason: "declined"})
	require.NoError(t, err)
	_, err = s.Claim(ctx, sas.ClaimParams{Key: k1, From: sas.Error, Attempt: 1, Owner: "a", Now: at(3 * time.Second), CompleteBy: at(time.Minute)})
	require.NoError(t, err)
	recs, err := s.Complete(ctx, sas.CompleteParams{Key: k1, Owner: "a", Attempt: 2, Now: at(4 * time.Second), Compensation: true,
		Next: &sas.ClaimParams{Key: k0, From: sas.Processed, Attempt: 1, Owner: "a", Now: at(4 * time.Second), CompleteBy: at(time.Minute)}})
	require.NoError(t, err)
	require.Equal(t, sas.Compensated, recs[0].ProcessState)
	require.Equal(t, sas.Compensating, recs[1].ProcessState)
	r, err := s.Fail(ctx, sas.FailParams{Key: k0, Owner: "a", Attempt: 2, Now: at(5 * time.Second), Reason: "refund refused", Compensation: true})
	require.NoError(t, err)
	require.Equal(t, sas.CompensationFailed, r.ProcessState)
	l, err := s.ListByState(ctx, sas.ListByStateParams{State: sas.CompensationFailed})
	require.NoError(t, err)
	require.Len(t, l.Records, 1, "a failed undo is listed for operators")
	// Give up on a stuck undo: CompensationFailed, too.
	_, err = s.Claim(ctx, sas.ClaimParams{Key: k0, From: sas.CompensationFailed, Attempt: 2, Owner: "op", Now: at(6 * time.Second), CompleteBy: at(time.Minute)})
	require.NoError(t, err)
	r, err = s.GiveUp(ctx, sas.GiveUpParams{Key: k0, From: sas.Compensating, Attempt: 3, Now: at(2 * time.Minute), Actor: "sup", Reason: "threshold"})
	require.NoError(t, err)
	require.Equal(t, sas.CompensationFailed, r.ProcessState)
	get(t, s, "o-cf2")
}
