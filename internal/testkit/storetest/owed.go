package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// giveUpSecond runs a two-step order to a give-up of its second step at
// now, with owed effects due at owedAt, and returns the given-up record.
func giveUpSecond(t *testing.T, s sas.StateStore, id string, now, owedAt time.Time) sas.StepRecord {
	t.Helper()
	submit(t, s, id, 2)
	claim(t, s, key(id, 0), 0, "a", T0, at(time.Minute))
	_, err := s.Complete(ctx, sas.CompleteParams{Key: key(id, 0), Owner: "a", Attempt: 1, Now: at(time.Second),
		Next: &sas.ClaimParams{Key: key(id, 1), Attempt: 0, Owner: "a", Now: at(time.Second), CompleteBy: at(time.Minute)}})
	require.NoError(t, err)
	r, err := s.GiveUp(ctx, sas.GiveUpParams{Key: key(id, 1), From: sas.Processing, Attempt: 1, Now: now,
		Actor: "sup", Reason: "stuck thrice", OwedAt: owedAt})
	require.NoError(t, err)
	return r
}

// testGiveUpOwes: the give-up write records the alert and the compensation
// it owes; the owed sweep finds them (only once due); listing Error still
// shows the record; Settle clears them, fenced, and leaves the alert the
// record describes unchanged.
func testGiveUpOwes(t *testing.T, h Harness) {
	f := h.New(t)
	s := f.Store
	now := at(2 * time.Minute)
	r := giveUpSecond(t, s, "o-owe", now, now.Add(30*time.Second))
	require.Equal(t, sas.Error, r.ProcessState)
	require.Equal(t, []sas.Effect{sas.EffectAlert, sas.EffectCompensate}, r.Owes)
	require.Equal(t, now.Add(30*time.Second), r.OwedAt)
	stored := get(t, s, "o-owe").Steps[1]
	require.Equal(t, r.Owes, stored.Owes, "GetOrder shows what is owed")
	alert := stored.OwedAlert("supervisor")
	require.Equal(t, "o-owe/1/Error/1", alert.ID)
	require.Equal(t, "stuck thrice", alert.Reason)

	early, err := s.FindOwed(ctx, sas.FindOwedParams{Now: now})
	require.NoError(t, err)
	require.Empty(t, early.Records, "not due before OwedAt")
	due, err := s.FindOwed(ctx, sas.FindOwedParams{Now: now.Add(30 * time.Second)})
	require.NoError(t, err)
	require.Len(t, due.Records, 1)
	got := due.Records[0]
	require.Equal(t, key("o-owe", 1), got.Key())
	require.Equal(t, r.Owes, got.Owes)
	require.Equal(t, alert, got.OwedAlert("supervisor"), "the index carries all the alert needs")
	require.Equal(t, stored.OwedCompensate("sup"), got.OwedCompensate("sup"))
	require.Equal(t, sas.ReadStats{Requests: f.Shards, ItemsRead: 1}, due.Stats)

	requireListed(t, s, sas.Error, key("o-owe", 1))
	requireListed(t, s, sas.CompensationFailed)

	_, err = s.Resubmit(ctx, sas.ResubmitParams{Key: key("o-owe", 1), Attempt: 1, Now: now, PickupBy: now.Add(time.Minute), Actor: "op"})
	require.ErrorIs(t, err, sas.ErrInvalid, "no resubmit while the give-up still owes its effects")

	_, err = s.Settle(ctx, sas.SettleParams{Key: key("o-owe", 1), State: sas.Error, Attempt: 2})
	requireRace(t, err)
	settled, err := s.Settle(ctx, sas.SettleParams{Key: key("o-owe", 1), State: sas.Error, Attempt: 1})
	require.NoError(t, err)
	require.Empty(t, settled.Owes)
	_, err = s.Settle(ctx, sas.SettleParams{Key: key("o-owe", 1), State: sas.Error, Attempt: 1})
	requireRace(t, err) // settled once only
	after := get(t, s, "o-owe").Steps[1]
	require.Empty(t, after.Owes)
	require.True(t, after.OwedAt.IsZero())
	require.Equal(t, alert, after.OwedAlert("supervisor"), "settling changes nothing the alert says")
	due, err = s.FindOwed(ctx, sas.FindOwedParams{Now: now.Add(time.Hour)})
	require.NoError(t, err)
	require.Empty(t, due.Records)
	requireListed(t, s, sas.Error, key("o-owe", 1))
}

// testSettleRecheck: a settle with Recheck (the supervisor's write once a
// give-up's compensate request went out) keeps everything owed and moves
// only when it is due again, fenced like a settle; the full settle (the
// scheduler's, once the compensation started) then clears it (issue 29, N6).
func testSettleRecheck(t *testing.T, h Harness) {
	f := h.New(t)
	s := f.Store
	now := at(2 * time.Minute)
	r := giveUpSecond(t, s, "o-rck", now, now)
	k := key("o-rck", 1)
	recheck := now.Add(15 * time.Minute)
	_, err := s.Settle(ctx, sas.SettleParams{Key: k, State: sas.Error, Attempt: 2, Recheck: recheck, OwedAt: now})
	requireRace(t, err)
	_, err = s.Settle(ctx, sas.SettleParams{Key: k, State: sas.Error, Attempt: 1, Recheck: recheck, OwedAt: now.Add(time.Second)})
	requireRace(t, err) // read at another due time
	moved, err := s.Settle(ctx, sas.SettleParams{Key: k, State: sas.Error, Attempt: 1, Recheck: recheck, OwedAt: now})
	require.NoError(t, err)
	_, err = s.Settle(ctx, sas.SettleParams{Key: k, State: sas.Error, Attempt: 1, Recheck: recheck, OwedAt: now})
	requireRace(t, err) // the same write again (its answer lost) moves nothing
	require.Equal(t, r.Owes, moved.Owes, "still owed")
	require.Equal(t, recheck, moved.OwedAt)
	require.Equal(t, r.UpdatedAt, moved.UpdatedAt, "no transition")
	require.Len(t, moved.History, len(r.History))

	due, err := s.FindOwed(ctx, sas.FindOwedParams{Now: recheck.Add(-time.Millisecond)})
	require.NoError(t, err)
	require.Empty(t, due.Records, "not due before the recheck")
	due, err = s.FindOwed(ctx, sas.FindOwedParams{Now: recheck})
	require.NoError(t, err)
	require.Len(t, due.Records, 1)
	require.Equal(t, r.Owes, due.Records[0].Owes)
	requireListed(t, s, sas.Error, k)

	settled, err := s.Settle(ctx, sas.SettleParams{Key: k, State: sas.Error, Attempt: 1})
	require.NoError(t, err)
	require.Empty(t, settled.Owes)
	_, err = s.Settle(ctx, sas.SettleParams{Key: k, State: sas.Error, Attempt: 1, Recheck: recheck.Add(time.Hour), OwedAt: recheck})
	requireRace(t, err) // settled: nothing left to defer
	due, err = s.FindOwed(ctx, sas.FindOwedParams{Now: recheck.Add(time.Hour)})
	require.NoError(t, err)
	require.Empty(t, due.Records)
}

// testCompensationClaimSettlesOwed: the scheduler's compensation claim of
// the given-up step is what the owed request asked for: it clears what is
// owed and puts the record in the Compensating partition, where the
// deadline sweep finds it.
func testCompensationClaimSettlesOwed(t *testing.T, h Harness) {
	s := h.New(t).Store
	now := at(2 * time.Minute)
	giveUpSecond(t, s, "o-owe-claim", now, now)
	c, err := s.Claim(ctx, sas.ClaimParams{Key: key("o-owe-claim", 1), From: sas.Error, Attempt: 1, Owner: "b", Now: now, CompleteBy: now.Add(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, sas.Compensating, c.ProcessState)
	require.Empty(t, c.Owes)
	owed, err := s.FindOwed(ctx, sas.FindOwedParams{Now: now.Add(time.Hour)})
	require.NoError(t, err)
	require.Empty(t, owed.Records)
	due, err := s.FindDue(ctx, sas.FindDueParams{State: sas.Compensating, Now: now.Add(time.Minute)})
	require.NoError(t, err)
	require.Len(t, due.Records, 1)
	requireListed(t, s, sas.Error)
}

// testUndoGiveUpOwesAlertOnly: a failed undo owes its alert, nothing else.
func testUndoGiveUpOwesAlertOnly(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-owe-undo", 1)
	claim(t, s, key("o-owe-undo", 0), 0, "a", T0, at(time.Minute))
	_, err := s.Complete(ctx, sas.CompleteParams{Key: key("o-owe-undo", 0), Owner: "a", Attempt: 1, Now: at(time.Second)})
	require.NoError(t, err)
	_, err = s.Claim(ctx, sas.ClaimParams{Key: key("o-owe-undo", 0), From: sas.Processed, Attempt: 1, Owner: "a", Now: at(time.Second), CompleteBy: at(time.Minute)})
	require.NoError(t, err)
	now := at(2 * time.Minute)
	r, err := s.GiveUp(ctx, sas.GiveUpParams{Key: key("o-owe-undo", 0), From: sas.Compensating, Attempt: 2, Now: now, Actor: "sup", Reason: "undo stuck"})
	require.NoError(t, err)
	require.Equal(t, sas.CompensationFailed, r.ProcessState)
	require.Equal(t, []sas.Effect{sas.EffectAlert}, r.Owes)
	require.Equal(t, now, r.OwedAt, "zero OwedAt: owed at once")
	requireListed(t, s, sas.CompensationFailed, key("o-owe-undo", 0))
	requireListed(t, s, sas.Error)
	due, err := s.FindOwed(ctx, sas.FindOwedParams{Now: now})
	require.NoError(t, err)
	require.Len(t, due.Records, 1)
	require.Equal(t, sas.CompensationFailed, due.Records[0].ProcessState)
}

// testOwedSweepCost: the owed sweep costs one query per shard and reads the
// owed records that are due, however many Error records there are.
func testOwedSweepCost(t *testing.T, h Harness) {
	const owedDue, owedLater, settled = 30, 20, 500
	f := h.New(t)
	require.NotNil(t, f.Load)
	var recs []sas.StepRecord
	for i := 0; i < owedDue+owedLater+settled; i++ {
		r := sas.StepRecord{OrderID: fmt.Sprintf("o-owc-%05d", i), StepName: "pay", ProcessState: sas.Error, Attempt: 1, FailureCount: 3,
			LastError: "stuck", CreatedAt: T0, UpdatedAt: at(time.Duration(i) * time.Millisecond),
			History: []sas.HistoryEntry{{At: T0, Actor: "load", To: sas.Processing, Attempt: 1}, {At: T0, Actor: "sup", From: sas.Processing, To: sas.Error, Attempt: 1}}}
		switch {
		case i < owedDue:
			r.Owes, r.OwedAt = sas.GiveUpOwes(sas.Error), at(time.Minute)
		case i < owedDue+owedLater:
			r.Owes, r.OwedAt = sas.GiveUpOwes(sas.Error), at(time.Hour)
		}
		r.Shard = sas.ShardFor(r.Key(), f.Shards)
		recs = append(recs, r)
	}
	require.NoError(t, f.Load(ctx, recs))
	var before sas.ReadStats
	if f.Counted != nil {
		before = f.Counted()
	}
	due, err := f.Store.FindOwed(ctx, sas.FindOwedParams{Now: at(2 * time.Minute), Limit: 1000})
	require.NoError(t, err)
	require.Len(t, due.Records, owedDue)
	if f.Counted != nil {
		after := f.Counted()
		require.Equal(t, sas.ReadStats{Requests: after.Requests - before.Requests, ItemsRead: after.ItemsRead - before.ItemsRead}, due.Stats)
	}
	require.Equal(t, sas.ReadStats{Requests: f.Shards, ItemsRead: owedDue}, due.Stats, "one query per shard, only the due owed records read")
	all := map[sas.StepKey]bool{}
	cursor := ""
	for {
		page, err := f.Store.ListByState(ctx, sas.ListByStateParams{State: sas.Error, Limit: 40, Cursor: cursor})
		require.NoError(t, err)
		for _, r := range page.Records {
			require.Equal(t, sas.Error, r.ProcessState)
			require.False(t, all[r.Key()], "listed twice: %s", r.Key())
			all[r.Key()] = true
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	require.Len(t, all, len(recs), "Error lists owing and settled records alike")
}

// requireListed checks ListByState(state) lists exactly the keys given.
func requireListed(t *testing.T, s sas.StateStore, state sas.ProcessState, keys ...sas.StepKey) {
	t.Helper()
	l, err := s.ListByState(ctx, sas.ListByStateParams{State: state})
	require.NoError(t, err)
	var got []sas.StepKey
	for _, r := range l.Records {
		require.Equal(t, state, r.ProcessState)
		got = append(got, r.Key())
	}
	require.ElementsMatch(t, keys, got, "records listed in %s", state)
}

// testResubmitRefusedOnceCompensating: a step of an order that is being or
// has been compensated is never re-armed (hole 5): the retry would be
// dropped, the supervisor would give up, and a step that never took effect
// would be undone.
func testResubmitRefusedOnceCompensating(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-rc", 2)
	claim(t, s, key("o-rc", 0), 0, "a", T0, at(time.Minute))
	_, err := s.Complete(ctx, sas.CompleteParams{Key: key("o-rc", 0), Owner: "a", Attempt: 1, Now: at(time.Second),
		Next: &sas.ClaimParams{Key: key("o-rc", 1), Attempt: 0, Owner: "a", Now: at(time.Second), CompleteBy: at(time.Minute)}})
	require.NoError(t, err)
	_, err = s.Fail(ctx, sas.FailParams{Key: key("o-rc", 1), Owner: "a", Attempt: 1, Now: at(2 * time.Second), Reason: "declined"})
	require.NoError(t, err)
	_, err = s.Claim(ctx, sas.ClaimParams{Key: key("o-rc", 0), From: sas.Processed, Attempt: 1, Owner: "a", Now: at(3 * time.Second), CompleteBy: at(time.Minute)})
	require.NoError(t, err)
	now := at(4 * time.Second)
	rp := sas.ResubmitParams{Key: key("o-rc", 1), Attempt: 1, Now: now, PickupBy: now.Add(time.Minute), Actor: "op"}
	_, err = s.Resubmit(ctx, rp)
	require.ErrorIs(t, err, sas.ErrInvalid, "compensating")
	require.ErrorContains(t, err, "compensated")
	_, err = s.Complete(ctx, sas.CompleteParams{Key: key("o-rc", 0), Owner: "a", Attempt: 2, Now: now, Compensation: true})
	require.NoError(t, err)
	_, err = s.Resubmit(ctx, rp)
	require.ErrorIs(t, err, sas.ErrInvalid, "compensated")
	require.Equal(t, sas.Error, get(t, s, "o-rc").Steps[1].ProcessState, "left as it was")
}

// testCompensationClaimLosesToAResubmit: an undo claim fenced on the
// order's other steps as read (ClaimParams.Siblings) loses when one moved
// since, here a resubmit of the failed step, and writes nothing; fenced on
// the steps as they are, it is made.
func testCompensationClaimLosesToAResubmit(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-cr", 2)
	claim(t, s, key("o-cr", 0), 0, "a", T0, at(time.Minute))
	_, err := s.Complete(ctx, sas.CompleteParams{Key: key("o-cr", 0), Owner: "a", Attempt: 1, Now: at(time.Second),
		Next: &sas.ClaimParams{Key: key("o-cr", 1), Attempt: 0, Owner: "a", Now: at(time.Second), CompleteBy: at(time.Minute)}})
	require.NoError(t, err)
	_, err = s.Fail(ctx, sas.FailParams{Key: key("o-cr", 1), Owner: "a", Attempt: 1, Now: at(2 * time.Second), Reason: "declined"})
	require.NoError(t, err)
	seen := []sas.StepSeen{{Step: 1, State: sas.Error}} // the compensation's read
	now := at(3 * time.Second)
	_, err = s.Resubmit(ctx, sas.ResubmitParams{Key: key("o-cr", 1), Attempt: 1, Now: now, PickupBy: now.Add(time.Minute), Actor: "op"})
	require.NoError(t, err)

	undo := sas.ClaimParams{Key: key("o-cr", 0), From: sas.Processed, Attempt: 1, Owner: "b", Now: at(4 * time.Second), CompleteBy: at(time.Minute), Siblings: seen}
	_, err = s.Claim(ctx, undo)
	var re *sas.RaceError
	require.ErrorAs(t, err, &re, "a sibling moved")
	require.Equal(t, key("o-cr", 1), re.Key, "the race is the sibling's")
	require.NotNil(t, re.Current)
	require.Equal(t, sas.Pending, re.Current.ProcessState)
	v := get(t, s, "o-cr")
	require.Equal(t, sas.Processed, v.Steps[0].ProcessState, "nothing written")
	require.Empty(t, v.Steps[0].LockedBy)

	undo.Siblings = []sas.StepSeen{{Step: 1, State: sas.Pending}}
	got, err := s.Claim(ctx, undo)
	require.NoError(t, err)
	require.Equal(t, sas.Compensating, got.ProcessState)
	require.Equal(t, "b", got.LockedBy)
	require.Equal(t, got, get(t, s, "o-cr").Steps[0], "the whole record as held")

	_, err = s.Claim(ctx, sas.ClaimParams{Key: key("o-cr", 1), Owner: "c", Now: now, CompleteBy: at(time.Minute), Siblings: []sas.StepSeen{{Step: 1, State: sas.Pending}}})
	require.ErrorIs(t, err, sas.ErrInvalid, "a claim is not its own sibling")
}
