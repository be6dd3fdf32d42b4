package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// testWaitExtendsWithoutAFailure: the supervisor lets a held lease's
// deadline pass while the agent queue still holds requests (docs/protocol.md,
// "Deadlines start at pick-up"). The wait keeps holder, attempt and failure
// count, moves the index entry to the new deadline, records WaitingSince and
// one history entry on the attempt's first wait only, and is visible to the
// next sweep from the index alone. Of racing supervisors that saw the same
// deadline exactly one extends it. The holder's late reply is accepted and
// clears WaitingSince; so does a rescue.
func testWaitExtendsWithoutAFailure(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-wait", 2)
	k := key("o-wait", 0)
	claim(t, s, k, 0, "a", T0, at(time.Minute))

	// Several supervisors saw the same passed deadline: one wins.
	now := at(61 * time.Second)
	wp := sas.WaitParams{Key: k, From: sas.Processing, Owner: "a", Attempt: 1, DueAt: at(time.Minute), Now: now,
		Until: now.Add(time.Minute), Actor: "sup", Reason: "agent queue holds 40 requests"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, lost := 0, 0
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Wait(ctx, wp)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				won++
				return
			}
			requireRace(t, err)
			lost++
		}()
	}
	wg.Wait()
	require.Equal(t, 1, won, "exactly one supervisor extends a deadline it saw")

	r := get(t, s, "o-wait").Steps[0]
	require.Equal(t, sas.Processing, r.ProcessState)
	require.Equal(t, "a", r.LockedBy)
	require.Equal(t, 1, r.Attempt)
	require.Zero(t, r.FailureCount, "waiting is not a failure")
	require.Equal(t, now.Add(time.Minute), r.CompleteBy)
	require.Equal(t, now.Add(time.Minute), r.DueAt)
	require.Equal(t, at(time.Minute), r.WaitingSince, "the wait limit counts from the first deadline that passed")
	require.Len(t, r.History, 3, "submitted, claimed, and one entry for the first wait")

	// The index shows it due at the new deadline, WaitingSince and
	// CreatedAt included (the supervisor decides from the index alone).
	res, err := s.FindDue(ctx, sas.FindDueParams{State: sas.Processing, Now: now.Add(30 * time.Second)})
	require.NoError(t, err)
	for _, d := range res.Records {
		require.NotEqual(t, k, d.Key(), "not due before its new deadline")
	}
	later := now.Add(2 * time.Minute)
	res, err = s.FindDue(ctx, sas.FindDueParams{State: sas.Processing, Now: later})
	require.NoError(t, err)
	var seen sas.StepRecord
	for _, d := range res.Records {
		if d.Key() == k {
			seen = d
		}
	}
	require.Equal(t, k, seen.Key(), "due again after the new deadline")
	require.Equal(t, at(time.Minute), seen.WaitingSince)
	require.Equal(t, T0, seen.CreatedAt)

	// A second wait: no new history entry, WaitingSince kept. A wait on a
	// stale view (first-wait view, old deadline) loses.
	stale := wp
	stale.Now, stale.Until = later, later.Add(time.Minute)
	_, err = s.Wait(ctx, stale)
	requireRace(t, err)
	second := sas.WaitParams{Key: k, From: sas.Processing, Owner: "a", Attempt: 1, DueAt: seen.DueAt, WaitingSince: seen.WaitingSince,
		Now: later, Until: later.Add(time.Minute), Actor: "sup", Reason: "still busy"}
	r, err = s.Wait(ctx, second)
	require.NoError(t, err)
	r = get(t, s, "o-wait").Steps[0]
	require.Len(t, r.History, 3, "later waits add no history")
	require.Equal(t, at(time.Minute), r.WaitingSince)
	require.Equal(t, later.Add(time.Minute), r.DueAt)

	// The holder's late reply is accepted: nobody took the step away.
	_, err = s.Complete(ctx, sas.CompleteParams{Key: k, Owner: "a", Attempt: 1, Now: later.Add(time.Second),
		Next: &sas.ClaimParams{Key: key("o-wait", 1), Owner: "a", Now: later.Add(time.Second), CompleteBy: later.Add(time.Hour)}})
	require.NoError(t, err)
	v := get(t, s, "o-wait")
	require.Equal(t, sas.Processed, v.Steps[0].ProcessState)
	require.True(t, v.Steps[0].WaitingSince.IsZero(), "completion clears WaitingSince")

	// A rescue after a wait clears it too, and only a held lease waits.
	k1 := key("o-wait", 1)
	end := later.Add(time.Hour)
	_, err = s.Wait(ctx, sas.WaitParams{Key: k1, From: sas.Processing, Owner: "a", Attempt: 1, DueAt: end, Now: end, Until: end.Add(time.Minute), Actor: "sup", Reason: "busy"})
	require.NoError(t, err)
	_, err = s.Rescue(ctx, sas.RescueParams{Key: k1, From: sas.Processing, Attempt: 1, Now: end.Add(time.Minute), PickupBy: end.Add(2 * time.Minute), Actor: "sup", Reason: "wait limit"})
	require.NoError(t, err)
	r = get(t, s, "o-wait").Steps[1]
	require.Equal(t, sas.Pending, r.ProcessState)
	require.True(t, r.WaitingSince.IsZero(), "a rescue clears WaitingSince")
	require.Equal(t, 1, r.FailureCount)
	_, err = s.Wait(ctx, sas.WaitParams{Key: k1, From: sas.Pending, Owner: "a", Attempt: 1, DueAt: end, Now: end, Until: end.Add(time.Minute)})
	require.ErrorIs(t, err, sas.ErrInvalid)
}
