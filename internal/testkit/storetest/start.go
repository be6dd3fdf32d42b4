package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// testStartRecordsThePickUp: an agent's report of a late pick-up
// (docs/protocol.md, "Deadlines start at pick-up"). Start keeps holder,
// attempt and failure count, sets StartedAt and moves the deadline and the
// index entry, whatever the deadline was (a wait's horizon included); the
// index shows StartedAt (the supervisor decides from it alone). A later
// report moves the deadline only later; an earlier one is returned as the
// record stands. A report for another holder or attempt loses the race.
// Every end of the lease clears StartedAt, and a rescue of a request lost
// before pick-up counts no failure.
func testStartRecordsThePickUp(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-start", 2)
	k := key("o-start", 0)
	claim(t, s, k, 0, "a", T0, at(time.Minute))

	// Waited on first: the deadline is a far horizon, no pick-up reported.
	_, err := s.Wait(ctx, sas.WaitParams{Key: k, From: sas.Processing, Owner: "a", Attempt: 1, DueAt: at(time.Minute),
		Now: at(61 * time.Second), Until: at(96 * time.Hour), Actor: "sup", Reason: "not picked up"})
	require.NoError(t, err)

	picked := at(10 * time.Minute)
	sp := sas.StartParams{Key: k, From: sas.Processing, Owner: "a", Attempt: 1, Now: picked, CompleteBy: picked.Add(time.Minute)}
	_, err = s.Start(ctx, sas.StartParams{Key: k, From: sas.Processing, Owner: "b", Attempt: 1, Now: picked, CompleteBy: picked.Add(time.Minute)})
	requireRace(t, err)
	_, err = s.Start(ctx, sas.StartParams{Key: k, From: sas.Processing, Owner: "a", Attempt: 2, Now: picked, CompleteBy: picked.Add(time.Minute)})
	requireRace(t, err)
	r, err := s.Start(ctx, sp)
	require.NoError(t, err)
	require.Equal(t, picked, r.StartedAt)
	require.Equal(t, picked.Add(time.Minute), r.CompleteBy, "the deadline counts from the pick-up, the horizon forgotten")
	r = get(t, s, "o-start").Steps[0]
	require.Equal(t, sas.Processing, r.ProcessState)
	require.Equal(t, "a", r.LockedBy)
	require.Equal(t, 1, r.Attempt)
	require.Zero(t, r.FailureCount)
	require.Equal(t, picked, r.StartedAt)
	require.Equal(t, picked.Add(time.Minute), r.DueAt)
	require.Equal(t, at(time.Minute), r.WaitingSince, "kept")
	require.Len(t, r.History, 3, "submitted, claimed, waited: a report adds no entry")

	// The index shows it due at the new deadline, with its pick-up.
	res, err := s.FindDue(ctx, sas.FindDueParams{State: sas.Processing, Now: picked.Add(2 * time.Minute)})
	require.NoError(t, err)
	var seen sas.StepRecord
	for _, d := range res.Records {
		if d.Key() == k {
			seen = d
		}
	}
	require.Equal(t, k, seen.Key(), "due after its new deadline")
	require.Equal(t, picked, seen.StartedAt, "projected: the supervisor decides from the index alone")

	// A second delivery's report moves it later; the first's, arriving
	// after, changes nothing.
	again := sp
	again.Now, again.CompleteBy = picked.Add(30*time.Second), picked.Add(90*time.Second)
	r, err = s.Start(ctx, again)
	require.NoError(t, err)
	require.Equal(t, picked.Add(90*time.Second), r.CompleteBy)
	r, err = s.Start(ctx, sp)
	require.NoError(t, err, "an earlier report is no race: the attempt is current")
	require.Equal(t, picked.Add(90*time.Second), r.CompleteBy, "never moved earlier")
	require.Equal(t, picked.Add(30*time.Second), r.StartedAt)

	// Rescue ends the lease and its pick-up; the next claim starts without.
	_, err = s.Rescue(ctx, sas.RescueParams{Key: k, From: sas.Processing, Attempt: 1, Now: picked.Add(2 * time.Minute),
		PickupBy: picked.Add(3 * time.Minute), Actor: "sup", Reason: "overran"})
	require.NoError(t, err)
	r = get(t, s, "o-start").Steps[0]
	require.True(t, r.StartedAt.IsZero(), "a rescue clears StartedAt")
	require.Equal(t, 1, r.FailureCount)
	_, err = s.Start(ctx, sp)
	requireRace(t, err) // a report for the attempt taken back
	claim(t, s, k, 1, "b", picked.Add(2*time.Minute), picked.Add(3*time.Minute))
	r = get(t, s, "o-start").Steps[0]
	require.True(t, r.StartedAt.IsZero(), "a claim starts unreported")

	// A request lost before pick-up is re-driven without a failure.
	_, err = s.Rescue(ctx, sas.RescueParams{Key: k, From: sas.Processing, Attempt: 2, Now: picked.Add(4 * time.Minute),
		PickupBy: picked.Add(5 * time.Minute), Actor: "sup", Reason: "lost", Lost: true})
	require.NoError(t, err)
	r = get(t, s, "o-start").Steps[0]
	require.Equal(t, sas.Pending, r.ProcessState)
	require.Equal(t, 1, r.FailureCount, "a lost request is not a failure")

	// Invalid parameters are invalid whatever the record.
	_, err = s.Start(ctx, sas.StartParams{Key: k, From: sas.Pending, Owner: "a", Attempt: 1, Now: picked, CompleteBy: picked.Add(time.Minute)})
	require.ErrorIs(t, err, sas.ErrInvalid)
	_, err = s.Start(ctx, sas.StartParams{Key: k, From: sas.Processing, Owner: "a", Attempt: 1, Now: picked, CompleteBy: picked})
	require.ErrorIs(t, err, sas.ErrInvalid)
}
