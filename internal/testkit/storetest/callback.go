package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// testHeartbeat: a waiting callback step's heartbeat moves its deadline and
// its index entry on, keeps holder, attempt and failure count, adds no
// history entry, and is fenced like a completion: another holder, another
// attempt, or a step no longer held is a lost race that changes nothing; so
// is a heartbeat that would not move the deadline later.
func testHeartbeat(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-hb", 2)
	k := key("o-hb", 0)
	claim(t, s, k, 0, "cb", T0, at(time.Hour))
	before := get(t, s, "o-hb").Steps[0]

	now := at(30 * time.Minute)
	got, err := s.Heartbeat(ctx, sas.HeartbeatParams{Key: k, Owner: "cb", Attempt: 1, Now: now, Until: now.Add(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, now.Add(time.Hour), got.CompleteBy)
	r := get(t, s, "o-hb").Steps[0]
	require.Equal(t, sas.Processing, r.ProcessState)
	require.Equal(t, "cb", r.LockedBy)
	require.Equal(t, 1, r.Attempt)
	require.Zero(t, r.FailureCount)
	require.Equal(t, now.Add(time.Hour), r.CompleteBy)
	require.Equal(t, now.Add(time.Hour), r.DueAt)
	require.Len(t, r.History, len(before.History), "a heartbeat adds no history entry")

	// Not due at the old deadline, due at the new one.
	res, err := s.FindDue(ctx, sas.FindDueParams{State: sas.Processing, Now: at(time.Hour)})
	require.NoError(t, err)
	for _, d := range res.Records {
		require.NotEqual(t, k, d.Key(), "not due before its new deadline")
	}
	res, err = s.FindDue(ctx, sas.FindDueParams{State: sas.Processing, Now: now.Add(time.Hour)})
	require.NoError(t, err)
	found := false
	for _, d := range res.Records {
		found = found || d.Key() == k
	}
	require.True(t, found, "due at its new deadline")

	// Only later: the same heartbeat written again (an ambiguous commit's
	// retry) and an older one written after it (two heartbeats racing)
	// lose, and the deadline stays where the newer put it.
	_, err = s.Heartbeat(ctx, sas.HeartbeatParams{Key: k, Owner: "cb", Attempt: 1, Now: now, Until: now.Add(time.Hour)})
	requireRace(t, err)
	_, err = s.Heartbeat(ctx, sas.HeartbeatParams{Key: k, Owner: "cb", Attempt: 1, Now: now, Until: now.Add(time.Hour - time.Second)})
	requireRace(t, err)
	require.Equal(t, now.Add(time.Hour), get(t, s, "o-hb").Steps[0].CompleteBy, "a deadline never moves back")

	// Fenced: another holder or attempt loses and changes nothing.
	_, err = s.Heartbeat(ctx, sas.HeartbeatParams{Key: k, Owner: "other", Attempt: 1, Now: now, Until: now.Add(2 * time.Hour)})
	requireRace(t, err)
	_, err = s.Heartbeat(ctx, sas.HeartbeatParams{Key: k, Owner: "cb", Attempt: 2, Now: now, Until: now.Add(2 * time.Hour)})
	requireRace(t, err)
	// Completed: a late heartbeat loses.
	// Completed from outside: the history entry names who completed it.
	_, err = s.Complete(ctx, sas.CompleteParams{Key: k, Owner: "cb", Attempt: 1, Now: now, By: "sender:AROAEXAMPLE (says alice)"})
	require.NoError(t, err)
	_, err = s.Heartbeat(ctx, sas.HeartbeatParams{Key: k, Owner: "cb", Attempt: 1, Now: now, Until: now.Add(2 * time.Hour)})
	requireRace(t, err)
	r = get(t, s, "o-hb").Steps[0]
	require.Equal(t, sas.Processed, r.ProcessState)
	require.Equal(t, "completed by sender:AROAEXAMPLE (says alice)", r.History[len(r.History)-1].Reason)
}
