package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// testCancelMarksTheStepInFlight: a cancel of a step in flight marks it
// and leaves its lease; its holder's completion is refused by the mark
// (with or without a successor's claim, which is then not made) until the
// holder says it knows; a second cancel writes nothing; a rescue keeps the
// mark; the order reads Cancelled once nothing of it runs.
func testCancelMarksTheStepInFlight(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-cx", 3)
	k0, k1, k2 := key("o-cx", 0), key("o-cx", 1), key("o-cx", 2)
	claim(t, s, k0, 0, "a", T0, at(time.Minute))
	_, err := s.Complete(ctx, sas.CompleteParams{Key: k0, Owner: "a", Attempt: 1, Now: at(time.Second),
		Next: &sas.ClaimParams{Key: k1, Owner: "a", Now: at(time.Second), CompleteBy: at(time.Minute)}})
	require.NoError(t, err)

	p := sas.CancelParams{Key: k1, From: sas.Processing, Attempt: 1, Now: at(2 * time.Second), Actor: "sender:AIDAOP", Reason: "customer asked"}
	_, err = s.Cancel(ctx, sas.CancelParams{Key: k1, From: sas.Processing, Attempt: 2, Now: p.Now, Actor: p.Actor})
	require.ErrorIs(t, err, sas.ErrLostRace, "fenced on the attempt seen")
	_, err = s.Cancel(ctx, sas.CancelParams{Key: k1, From: sas.Processing, Attempt: 1, Now: p.Now})
	require.ErrorIs(t, err, sas.ErrInvalid, "a cancel records who asked")
	r, err := s.Cancel(ctx, p)
	require.NoError(t, err)
	require.True(t, r.Cancelled)
	require.Equal(t, sas.Processing, r.ProcessState)
	require.Equal(t, "a", r.LockedBy, "the step in flight keeps its lease")
	require.Equal(t, at(time.Minute), r.CompleteBy)
	last := r.History[len(r.History)-1]
	require.Equal(t, "sender:AIDAOP", last.Actor)
	require.Equal(t, "cancel requested by sender:AIDAOP: customer asked", last.Reason)
	again, err := s.Cancel(ctx, p)
	require.NoError(t, err, "a second cancel of a marked step is no race")
	require.Len(t, again.History, len(r.History), "and writes nothing")

	_, err = s.Complete(ctx, sas.CompleteParams{Key: k1, Owner: "a", Attempt: 1, Now: at(3 * time.Second),
		Next: &sas.ClaimParams{Key: k2, Owner: "a", Now: at(3 * time.Second), CompleteBy: at(time.Minute)}})
	var re *sas.RaceError
	require.ErrorAs(t, err, &re, "the holder's completion is refused by the mark")
	require.Equal(t, k1, re.Key)
	require.NotNil(t, re.Current)
	require.True(t, re.Current.Cancelled, "the refusal returns the marked record")
	require.Equal(t, sas.Pending, get(t, s, "o-cx").Steps[2].ProcessState, "no successor was claimed")
	_, err = s.Complete(ctx, sas.CompleteParams{Key: k1, Owner: "a", Attempt: 1, Now: at(3 * time.Second)})
	require.ErrorIs(t, err, sas.ErrLostRace, "without a successor too")
	_, err = s.Complete(ctx, sas.CompleteParams{Key: k1, Owner: "a", Attempt: 1, Now: at(3 * time.Second), Cancelled: true,
		Next: &sas.ClaimParams{Key: k2, Owner: "a", Now: at(3 * time.Second), CompleteBy: at(time.Minute)}})
	require.ErrorIs(t, err, sas.ErrInvalid, "a cancelled step's completion claims no successor")

	v := get(t, s, "o-cx")
	require.Equal(t, sas.Processing, v.State(), "the step in flight settles first")
	require.False(t, v.Settled())
	recs, err := s.Complete(ctx, sas.CompleteParams{Key: k1, Owner: "a", Attempt: 1, Now: at(3 * time.Second), Cancelled: true})
	require.NoError(t, err)
	require.Equal(t, sas.Processed, recs[0].ProcessState)
	require.True(t, recs[0].Cancelled, "the mark stays")
	v = get(t, s, "o-cx")
	require.Equal(t, sas.Cancelled, v.State())
	require.True(t, v.Settled(), "no successor is on its way after a cancelled step")
	require.ErrorIs(t, sas.CanResubmit(v, 1), sas.ErrInvalid)

	// The undos run as for any compensation; the order stays Cancelled.
	for _, k := range []sas.StepKey{k1, k0} {
		u, err := s.Claim(ctx, sas.ClaimParams{Key: k, From: sas.Processed, Attempt: 1, Owner: "b", Now: at(4 * time.Second), CompleteBy: at(time.Minute)})
		require.NoError(t, err)
		_, err = s.Complete(ctx, sas.CompleteParams{Key: k, Owner: "b", Attempt: u.Attempt, Now: at(5 * time.Second), Compensation: true})
		require.NoError(t, err)
	}
	require.Equal(t, sas.Cancelled, get(t, s, "o-cx").State())

	// A rescue of a marked step in flight keeps the mark.
	submit(t, s, "o-cr", 2)
	kr := key("o-cr", 0)
	claim(t, s, kr, 0, "a", T0, at(time.Minute))
	_, err = s.Cancel(ctx, sas.CancelParams{Key: kr, From: sas.Processing, Attempt: 1, Now: at(time.Second), Actor: "op"})
	require.NoError(t, err)
	rescued, err := s.Rescue(ctx, sas.RescueParams{Key: kr, From: sas.Processing, Attempt: 1, Now: at(2 * time.Minute),
		PickupBy: at(3 * time.Minute), Actor: "sup", Reason: "deadline passed"})
	require.NoError(t, err)
	require.True(t, rescued.Cancelled)
	require.Equal(t, sas.Processing, get(t, s, "o-cr").State(), "a marked step handed back is still to be turned away")
	failedR, err := s.Cancel(ctx, sas.CancelParams{Key: kr, From: sas.Pending, Attempt: 1, Now: at(2 * time.Minute), Actor: "sched"})
	require.NoError(t, err)
	require.Equal(t, sas.Error, failedR.ProcessState)
	require.Equal(t, sas.Cancelled, get(t, s, "o-cr").State())
}

// testCancelTurnsAwayAReadyStep: a cancel of a step ready to be claimed
// (Pending, no holder) moves it to Error, marked, out of the pick-up
// index and into the Error listing, fenced on the attempt; a claim made
// first wins, and the cancel loses the race to it.
func testCancelTurnsAwayAReadyStep(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-ca", 2)
	k0 := key("o-ca", 0)
	p := sas.CancelParams{Key: k0, From: sas.Pending, Attempt: 0, Now: at(time.Second), Actor: "submitter:AROA1", Reason: "no longer needed"}
	r, err := s.Cancel(ctx, p)
	require.NoError(t, err)
	require.Equal(t, sas.Error, r.ProcessState)
	require.True(t, r.Cancelled)
	require.Equal(t, "submitter:AROA1", r.FailedBy)
	require.False(t, r.Refused, "nobody refused it")
	require.True(t, r.DueAt.IsZero())
	require.Equal(t, "cancel requested by submitter:AROA1: no longer needed", r.LastError)
	due, err := s.FindDue(ctx, sas.FindDueParams{State: sas.Pending, Now: at(time.Hour)})
	require.NoError(t, err)
	require.Empty(t, due.Records, "no longer due for pick-up")
	listed, err := s.ListByState(ctx, sas.ListByStateParams{State: sas.Error})
	require.NoError(t, err)
	require.Len(t, listed.Records, 1)
	_, err = s.Claim(ctx, sas.ClaimParams{Key: k0, Attempt: 0, Owner: "a", Now: at(2 * time.Second), CompleteBy: at(time.Minute)})
	require.ErrorIs(t, err, sas.ErrLostRace, "a turned-away step is never claimed")
	v := get(t, s, "o-ca")
	require.Equal(t, sas.Cancelled, v.State())
	require.True(t, v.Settled())

	submit(t, s, "o-cb", 1)
	kb := key("o-cb", 0)
	claim(t, s, kb, 0, "a", T0, at(time.Minute))
	_, err = s.Cancel(ctx, sas.CancelParams{Key: kb, From: sas.Pending, Attempt: 0, Now: at(time.Second), Actor: "op"})
	var re *sas.RaceError
	require.True(t, errors.As(err, &re) && re.Current != nil && re.Current.ProcessState == sas.Processing,
		"the claim came first: the cancel loses, and sees the step in flight (%v)", err)
}
