package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

var ctx = context.Background()

func testSubmitCreates(t *testing.T, h Harness) {
	s := h.New(t).Store
	v := submit(t, s, "o-create", 3)
	got := get(t, s, "o-create")
	require.Equal(t, "test", got.Order.Workflow)
	require.JSONEq(t, `{"amount":42,"currency":"EUR"}`, string(got.Order.Payload))
	require.Equal(t, []string{"step0", "step1", "step2"}, got.Order.Steps)
	require.Len(t, got.Steps, 3)
	for i, r := range got.Steps {
		require.Equal(t, i, r.Step)
		require.Equal(t, sas.Pending, r.ProcessState)
		require.Empty(t, r.LockedBy, "new records have a null LockedBy")
		require.True(t, r.CompleteBy.IsZero(), "new records have a null CompleteBy")
		require.Zero(t, r.FailureCount)
		require.Zero(t, r.Attempt)
		require.Len(t, r.History, 1)
		require.Equal(t, T0, r.CreatedAt)
	}
	require.Equal(t, at(time.Minute), got.Steps[0].DueAt, "the first step is due for pick-up")
	require.True(t, got.Steps[1].DueAt.IsZero(), "later steps wait on their predecessor")
	require.Equal(t, len(v.Steps), len(got.Steps))
	require.Len(t, got.History, 3)
}

func testSubmitDuplicate(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-dup", 2)
	claim(t, s, key("o-dup", 0), 0, "sched-a", at(time.Second), at(time.Minute))
	res, err := s.Submit(ctx, sas.SubmitParams{Order: order("o-dup", 2), Now: at(5 * time.Second), PickupBy: at(2 * time.Minute)})
	require.NoError(t, err, "the same order again is a successful no-op")
	require.False(t, res.Created)
	require.Equal(t, sas.Processing, res.View.Steps[0].ProcessState, "the no-op returns the stored order, untouched")
	require.Equal(t, "sched-a", res.View.Steps[0].LockedBy)
	require.Equal(t, 1, res.View.Steps[0].Attempt)
}

func testSubmitConflict(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-conflict", 1)
	other := order("o-conflict", 1)
	other.Payload = []byte(`{"amount":43}`)
	_, err := s.Submit(ctx, sas.SubmitParams{Order: other, Now: T0, PickupBy: at(time.Minute)})
	require.ErrorIs(t, err, sas.ErrOrderConflict)
	// The same request after a deploy changed the workflow's steps is the
	// same order: it keeps the steps and version it was submitted with.
	more := order("o-conflict", 2)
	more.Version = "v2"
	res, err := s.Submit(ctx, sas.SubmitParams{Order: more, Now: T0, PickupBy: at(time.Minute)})
	require.NoError(t, err)
	require.False(t, res.Created)
	require.Equal(t, []string{"step0"}, res.View.Order.Steps)
	require.Empty(t, res.View.Order.Version)
	v := get(t, s, "o-conflict")
	require.Len(t, v.Steps, 1, "a conflicting submission writes nothing")
	require.JSONEq(t, `{"amount":42,"currency":"EUR"}`, string(v.Order.Payload))

	// Numbers are compared as written: 2^53+1 is not 2^53, though a
	// float64 reads both as one (issue 29, F-9).
	big := order("o-big", 1)
	big.Payload = []byte(`{"amount":9007199254740993}`)
	_, err = s.Submit(ctx, sas.SubmitParams{Order: big, Now: T0, PickupBy: at(time.Minute)})
	require.NoError(t, err)
	big.Payload = []byte(`{"amount":9007199254740992}`)
	_, err = s.Submit(ctx, sas.SubmitParams{Order: big, Now: T0, PickupBy: at(time.Minute)})
	require.ErrorIs(t, err, sas.ErrOrderConflict)
	big.Payload = []byte(`{ "amount": 9007199254740993 }`)
	res, err = s.Submit(ctx, sas.SubmitParams{Order: big, Now: T0, PickupBy: at(time.Minute)})
	require.NoError(t, err, "the same number is the same order")
	require.False(t, res.Created)

	// The submitter is kept with the order, and is not its content.
	mine := order("o-mine", 1)
	mine.Submitter = "AROAOWNER"
	_, err = s.Submit(ctx, sas.SubmitParams{Order: mine, Now: T0, PickupBy: at(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, "AROAOWNER", get(t, s, "o-mine").Order.Submitter)
	mine.Submitter = "AROAOTHER"
	res, err = s.Submit(ctx, sas.SubmitParams{Order: mine, Now: T0, PickupBy: at(time.Minute)})
	require.NoError(t, err, "another sender's same content is the same content (the scheduler tells the senders apart)")
	require.Equal(t, "AROAOWNER", res.View.Order.Submitter)
}

func testSubmitConcurrent(t *testing.T, h Harness) {
	s := h.New(t).Store
	const n = 16
	var created atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A redelivered message is processed again until it succeeds;
			// a concurrent transaction is a lost race the caller retries.
			for try := 0; try < 20; try++ {
				res, err := s.Submit(ctx, sas.SubmitParams{Order: order("o-conc", 3), Now: T0, PickupBy: at(time.Minute)})
				if errors.Is(err, sas.ErrLostRace) {
					continue
				}
				if err == nil && res.Created {
					created.Add(1)
				}
				errs <- err
				return
			}
			errs <- errors.New("still racing after 20 tries")
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int32(1), created.Load(), "exactly one submission creates the order")
	require.Len(t, get(t, s, "o-conc").Steps, 3, "never a half-written order")
}

func testSubmitWithClaim(t *testing.T, h Harness) {
	s := h.New(t).Store
	res, err := s.Submit(ctx, sas.SubmitParams{Order: order("o-sc", 2), Now: T0, PickupBy: at(time.Minute),
		Claim: &sas.ClaimParams{Owner: "sched-a", CompleteBy: at(30 * time.Second)}})
	require.NoError(t, err)
	require.True(t, res.Created)
	r := get(t, s, "o-sc").Steps[0]
	require.Equal(t, sas.Processing, r.ProcessState)
	require.Equal(t, "sched-a", r.LockedBy)
	require.Equal(t, 1, r.Attempt)
	require.Equal(t, at(30*time.Second), r.CompleteBy)
	require.Equal(t, at(30*time.Second), r.DueAt)
	require.Len(t, r.History, 2, "submitted, then claimed")
}

func testClaimFencing(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-cf", 1)
	k := key("o-cf", 0)
	_, err := s.Claim(ctx, sas.ClaimParams{Key: k, Attempt: 3, Owner: "a", Now: T0, CompleteBy: at(time.Minute)})
	requireRace(t, err) // wrong attempt
	r := claim(t, s, k, 0, "a", at(time.Second), at(time.Minute))
	require.Equal(t, sas.Processing, r.ProcessState)
	require.Equal(t, "a", r.LockedBy)
	require.Equal(t, 1, r.Attempt)
	require.Equal(t, at(time.Minute), r.CompleteBy)
	_, err = s.Claim(ctx, sas.ClaimParams{Key: k, Attempt: 0, Owner: "b", Now: at(2 * time.Second), CompleteBy: at(time.Minute)})
	re := requireRace(t, err)
	require.NotNil(t, re.Current, "the lost race reports who holds it")
	require.Equal(t, "a", re.Current.LockedBy)
	_, err = s.Claim(ctx, sas.ClaimParams{Key: key("nope", 0), Owner: "a", Now: T0, CompleteBy: at(time.Minute)})
	require.ErrorIs(t, err, sas.ErrNotFound)
	_, err = s.Claim(ctx, sas.ClaimParams{Key: k, Owner: "", Now: T0, CompleteBy: at(time.Minute)})
	require.ErrorIs(t, err, sas.ErrInvalid)
}

// testClaimRace: many schedulers race for one step, round after round;
// exactly one wins each time. Remove the claim's condition and this fails.
func testClaimRace(t *testing.T, h Harness) {
	s := h.New(t).Store
	const racers = 24
	for round := 0; round < h.Rounds; round++ {
		id := fmt.Sprintf("o-race-%d", round)
		submit(t, s, id, 1)
		var wins atomic.Int32
		var winner atomic.Value
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, racers)
		for i := 0; i < racers; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				owner := fmt.Sprintf("sched-%02d", i)
				_, err := s.Claim(ctx, sas.ClaimParams{Key: key(id, 0), Attempt: 0, Owner: owner, Now: at(time.Second), CompleteBy: at(time.Minute)})
				switch {
				case err == nil:
					wins.Add(1)
					winner.Store(owner)
				case !errors.Is(err, sas.ErrLostRace):
					errs <- err
				}
			}(i)
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err, "a loser must get ErrLostRace, nothing else")
		}
		require.Equal(t, int32(1), wins.Load(), "round %d: exactly one claim wins", round)
		v := get(t, s, id)
		require.Equal(t, winner.Load(), v.Steps[0].LockedBy)
		require.Equal(t, 1, v.Steps[0].Attempt)
		require.Len(t, v.Steps[0].History, 2, "one claim recorded")
	}
}

func testCompleteFencing(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-cp", 1)
	k := key("o-cp", 0)
	claim(t, s, k, 0, "a", T0, at(time.Minute))
	_, err := s.Complete(ctx, sas.CompleteParams{Key: k, Owner: "b", Attempt: 1, Now: at(time.Second)})
	requireRace(t, err) // not the holder
	_, err = s.Complete(ctx, sas.CompleteParams{Key: k, Owner: "a", Attempt: 2, Now: at(time.Second)})
	requireRace(t, err) // not the attempt
	recs, err := s.Complete(ctx, sas.CompleteParams{Key: k, Owner: "a", Attempt: 1, Now: at(2 * time.Second)})
	require.NoError(t, err)
	require.Equal(t, sas.Processed, recs[0].ProcessState)
	require.Empty(t, recs[0].LockedBy)
	require.True(t, recs[0].CompleteBy.IsZero())
	// A duplicate reply loses, and says the step is already Processed at
	// that attempt, so the caller can acknowledge it as a duplicate.
	_, err = s.Complete(ctx, sas.CompleteParams{Key: k, Owner: "a", Attempt: 1, Now: at(3 * time.Second)})
	re := requireRace(t, err)
	require.NotNil(t, re.Current)
	require.Equal(t, sas.Processed, re.Current.ProcessState)
	require.Equal(t, 1, re.Current.Attempt)
	v := get(t, s, "o-cp")
	require.Equal(t, sas.Processed, v.State())
	due, err := s.FindDue(ctx, sas.FindDueParams{State: sas.Processing, Now: at(time.Hour)})
	require.NoError(t, err)
	require.Empty(t, due.Records, "a Processed step leaves the index")
}

func testCompleteNextAtomic(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-next", 2)
	k0, k1 := key("o-next", 0), key("o-next", 1)
	claim(t, s, k0, 0, "a", T0, at(time.Minute))
	recs, err := s.Complete(ctx, sas.CompleteParams{Key: k0, Owner: "a", Attempt: 1, Now: at(time.Second),
		Next: &sas.ClaimParams{Key: k1, Attempt: 0, Owner: "b", Now: at(time.Second), CompleteBy: at(time.Minute)}})
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.Equal(t, sas.Processed, recs[0].ProcessState)
	require.Equal(t, sas.Processing, recs[1].ProcessState)
	require.Equal(t, "b", recs[1].LockedBy)
	require.Equal(t, 1, recs[1].Attempt)
	v := get(t, s, "o-next")
	require.Equal(t, sas.Processed, v.Steps[0].ProcessState)
	require.Equal(t, sas.Processing, v.Steps[1].ProcessState)
	require.Equal(t, at(time.Minute), v.Steps[1].CompleteBy)

	// If the next step cannot be claimed, the completion is not written either.
	submit(t, s, "o-next2", 2)
	k0, k1 = key("o-next2", 0), key("o-next2", 1)
	claim(t, s, k0, 0, "a", T0, at(time.Minute))
	claim(t, s, k1, 0, "intruder", T0, at(time.Minute))
	_, err = s.Complete(ctx, sas.CompleteParams{Key: k0, Owner: "a", Attempt: 1, Now: at(time.Second),
		Next: &sas.ClaimParams{Key: k1, Attempt: 0, Owner: "b", Now: at(time.Second), CompleteBy: at(time.Minute)}})
	requireRace(t, err)
	v = get(t, s, "o-next2")
	require.Equal(t, sas.Processing, v.Steps[0].ProcessState, "all or nothing")
	require.Equal(t, "intruder", v.Steps[1].LockedBy)
}

func testFail(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-fail", 1)
	k := key("o-fail", 0)
	claim(t, s, k, 0, "a", T0, at(time.Minute))
	_, err := s.Fail(ctx, sas.FailParams{Key: k, Owner: "b", Attempt: 1, Now: at(time.Second), Reason: "declined"})
	requireRace(t, err)
	r, err := s.Fail(ctx, sas.FailParams{Key: k, Owner: "a", Attempt: 1, Now: at(time.Second), Reason: "payment declined (402)"})
	require.NoError(t, err)
	require.Equal(t, sas.Error, r.ProcessState)
	require.Equal(t, "payment declined (402)", r.LastError)
	_, err = s.Fail(ctx, sas.FailParams{Key: k, Owner: "a", Attempt: 1, Now: at(2 * time.Second), Reason: "again"})
	requireRace(t, err)
	l, err := s.ListByState(ctx, sas.ListByStateParams{State: sas.Error})
	require.NoError(t, err)
	require.Len(t, l.Records, 1)
	require.Equal(t, k, l.Records[0].Key())
	require.Equal(t, sas.Error, get(t, s, "o-fail").State())
}

// testLateCompletionVsRescue: the agent's reply arrives just as the
// supervisor decides the step is stuck. Exactly one of them wins, every
// round, and the loser changes nothing (river issue 1302).
func testLateCompletionVsRescue(t *testing.T, h Harness) {
	s := h.New(t).Store
	var completes, rescues int
	for round := 0; round < h.Rounds; round++ {
		id := fmt.Sprintf("o-late-%d", round)
		submit(t, s, id, 1)
		k := key(id, 0)
		claim(t, s, k, 0, "a", T0, at(time.Minute))
		now := at(61 * time.Second) // past CompleteBy
		var cErr, rErr error
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, cErr = s.Complete(ctx, sas.CompleteParams{Key: k, Owner: "a", Attempt: 1, Now: now})
		}()
		go func() {
			defer wg.Done()
			<-start
			_, rErr = s.Rescue(ctx, sas.RescueParams{Key: k, From: sas.Processing, Attempt: 1, Now: now, PickupBy: now.Add(time.Minute), Actor: "supervisor", Reason: "deadline passed"})
		}()
		close(start)
		wg.Wait()
		require.True(t, (cErr == nil) != (rErr == nil), "round %d: exactly one wins (complete: %v, rescue: %v)", round, cErr, rErr)
		r := get(t, s, id).Steps[0]
		if cErr == nil {
			completes++
			requireRace(t, rErr)
			require.Equal(t, sas.Processed, r.ProcessState, "the rescue must not overwrite a completed step")
			require.Zero(t, r.FailureCount)
		} else {
			rescues++
			requireRace(t, cErr)
			require.Equal(t, sas.Pending, r.ProcessState)
			require.Equal(t, 1, r.FailureCount)
			require.Equal(t, now.Add(time.Minute), r.DueAt, "handed back, due for pick-up: not lost")
		}
	}
	t.Logf("%d rounds: completion won %d, rescue won %d", h.Rounds, completes, rescues)
}

func testStaleReply(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-stale", 1)
	k := key("o-stale", 0)
	claim(t, s, k, 0, "a", T0, at(time.Minute))
	now := at(2 * time.Minute)
	_, err := s.Rescue(ctx, sas.RescueParams{Key: k, From: sas.Processing, Attempt: 1, Now: now, PickupBy: now.Add(time.Minute), Actor: "sup", Reason: "stuck"})
	require.NoError(t, err)
	claim(t, s, k, 1, "b", now.Add(time.Second), now.Add(time.Minute))
	// The first attempt's agent finally answers: it must change nothing.
	_, err = s.Complete(ctx, sas.CompleteParams{Key: k, Owner: "a", Attempt: 1, Now: now.Add(2 * time.Second)})
	re := requireRace(t, err)
	require.Equal(t, 2, re.Current.Attempt)
	_, err = s.Fail(ctx, sas.FailParams{Key: k, Owner: "a", Attempt: 1, Now: now.Add(2 * time.Second), Reason: "late error"})
	requireRace(t, err)
	r := get(t, s, "o-stale").Steps[0]
	require.Equal(t, sas.Processing, r.ProcessState)
	require.Equal(t, "b", r.LockedBy)
	require.Equal(t, 2, r.Attempt)
	_, err = s.Complete(ctx, sas.CompleteParams{Key: k, Owner: "b", Attempt: 2, Now: now.Add(3 * time.Second)})
	require.NoError(t, err)
}

func testRescueRequiresExpiry(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-exp", 1)
	k := key("o-exp", 0)
	claim(t, s, k, 0, "a", T0, at(time.Minute))
	_, err := s.Rescue(ctx, sas.RescueParams{Key: k, From: sas.Processing, Attempt: 1, Now: at(59 * time.Second), PickupBy: at(2 * time.Minute), Actor: "sup", Reason: "early"})
	requireRace(t, err)
	_, err = s.GiveUp(ctx, sas.GiveUpParams{Key: k, From: sas.Processing, Attempt: 1, Now: at(59 * time.Second), Actor: "sup", Reason: "early"})
	requireRace(t, err)
	_, err = s.Rescue(ctx, sas.RescueParams{Key: k, From: sas.Processing, Attempt: 1, Now: at(61 * time.Second), PickupBy: at(61 * time.Second), Actor: "sup"})
	require.ErrorIs(t, err, sas.ErrInvalid, "the pick-up deadline must be in the future")
	r, err := s.Rescue(ctx, sas.RescueParams{Key: k, From: sas.Processing, Attempt: 1, Now: at(time.Minute), PickupBy: at(2 * time.Minute), Actor: "sup", Reason: "deadline passed"})
	require.NoError(t, err, "a deadline equal to now has passed")
	require.Equal(t, sas.Pending, r.ProcessState)
	require.Empty(t, r.LockedBy)
	require.True(t, r.CompleteBy.IsZero())
	require.Equal(t, 1, r.FailureCount)
	require.Equal(t, 1, r.Attempt, "the next claim makes it attempt 2")
}

// Issue 19: the holder of an attempt ends it early on its agent's
// transient outcome (Rescue or GiveUp with a Holder): fenced on the lease
// held (state, holder, attempt), whatever the deadline; anyone else, or a
// later attempt, loses.
func testHolderEndsItsAttemptEarly(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-hold", 1)
	k := key("o-hold", 0)
	claim(t, s, k, 0, "a", T0, at(time.Minute))
	_, err := s.Rescue(ctx, sas.RescueParams{Key: k, From: sas.Processing, Attempt: 1, Now: at(time.Second), PickupBy: at(time.Minute), Actor: "sched", Holder: "b", Reason: "not the holder"})
	requireRace(t, err)
	_, err = s.Rescue(ctx, sas.RescueParams{Key: k, From: sas.Processing, Attempt: 2, Now: at(time.Second), PickupBy: at(time.Minute), Actor: "sched", Holder: "a", Reason: "not the attempt"})
	requireRace(t, err)
	r, err := s.Rescue(ctx, sas.RescueParams{Key: k, From: sas.Processing, Attempt: 1, Now: at(time.Second), PickupBy: at(time.Minute), Actor: "sched", Holder: "a", Reason: "attempt 1 failed"})
	require.NoError(t, err, "before its deadline: the holder's word ends it")
	require.Equal(t, sas.Pending, r.ProcessState)
	require.Empty(t, r.LockedBy)
	require.Equal(t, 1, r.FailureCount)
	require.Equal(t, at(time.Minute), r.DueAt)
	_, err = s.Rescue(ctx, sas.RescueParams{Key: k, From: sas.Processing, Attempt: 1, Now: at(time.Second), PickupBy: at(time.Minute), Actor: "sched", Holder: "a", Reason: "again"})
	requireRace(t, err)

	claim(t, s, k, 1, "a", at(2*time.Second), at(time.Minute))
	g, err := s.GiveUp(ctx, sas.GiveUpParams{Key: k, From: sas.Processing, Attempt: 2, Now: at(3 * time.Second), OwedAt: at(33 * time.Second), Actor: "sched", Holder: "a", Reason: "attempt 2 failed: giving up"})
	require.NoError(t, err)
	require.Equal(t, sas.Error, g.ProcessState)
	require.Equal(t, 2, g.FailureCount)
	require.False(t, g.Refused, "its outcome is unknown: undone by a compensation")
	require.Equal(t, "sched", g.FailedBy)
	require.Equal(t, sas.GiveUpOwes(sas.Error), g.Owes)
	RequireLegalHistory(t, get(t, s, "o-hold"))
}

func testRacingSupervisors(t *testing.T, h Harness) {
	s := h.New(t).Store
	const sups = 8
	for round := 0; round < h.Rounds/5+1; round++ {
		id := fmt.Sprintf("o-sups-%d", round)
		submit(t, s, id, 1)
		k := key(id, 0)
		claim(t, s, k, 0, "a", T0, at(time.Minute))
		now := at(2 * time.Minute)
		var wins atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < sups; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				var err error
				if i%2 == 0 {
					_, err = s.Rescue(ctx, sas.RescueParams{Key: k, From: sas.Processing, Attempt: 1, Now: now, PickupBy: now.Add(time.Minute), Actor: fmt.Sprintf("sup-%d", i), Reason: "stuck"})
				} else {
					_, err = s.GiveUp(ctx, sas.GiveUpParams{Key: k, From: sas.Processing, Attempt: 1, Now: now, Actor: fmt.Sprintf("sup-%d", i), Reason: "threshold"})
				}
				if err == nil {
					wins.Add(1)
				} else if !errors.Is(err, sas.ErrLostRace) {
					t.Errorf("supervisor %d: %v", i, err)
				}
			}(i)
		}
		close(start)
		wg.Wait()
		require.Equal(t, int32(1), wins.Load(), "exactly one supervisor acts on a stuck step")
		r := get(t, s, id).Steps[0]
		require.Equal(t, 1, r.FailureCount, "FailureCount bumped once")
	}
}

func testStranded(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-strand", 1) // Pending, due for pick-up at T0+1m, never claimed
	k := key("o-strand", 0)
	due, err := s.FindDue(ctx, sas.FindDueParams{State: sas.Pending, Now: at(59 * time.Second)})
	require.NoError(t, err)
	require.Empty(t, due.Records)
	due, err = s.FindDue(ctx, sas.FindDueParams{State: sas.Pending, Now: at(time.Minute)})
	require.NoError(t, err)
	require.Len(t, due.Records, 1)
	require.Equal(t, k, due.Records[0].Key())
	r := due.Records[0]
	now := at(time.Minute)
	_, err = s.Rescue(ctx, sas.RescueParams{Key: k, From: sas.Pending, Attempt: r.Attempt, Now: now, PickupBy: now.Add(time.Minute), Actor: "sup-1", Reason: "never picked up"})
	require.NoError(t, err)
	_, err = s.Rescue(ctx, sas.RescueParams{Key: k, From: sas.Pending, Attempt: r.Attempt, Now: now, PickupBy: now.Add(time.Minute), Actor: "sup-2", Reason: "never picked up"})
	requireRace(t, err) // the second supervisor saw the same stale entry
	got := get(t, s, "o-strand").Steps[0]
	require.Equal(t, sas.Pending, got.ProcessState)
	require.Equal(t, 1, got.FailureCount)
	require.Equal(t, now.Add(time.Minute), got.DueAt)
	claim(t, s, k, 0, "a", now.Add(time.Second), now.Add(time.Minute))
}

// testUnclaimedRedrive: the re-drive of a step no scheduler claimed by its
// pick-up deadline (sas.RescueParams.Lost with WaitingSince) counts no
// failure and keeps how long it has waited, in the record and in the index
// the supervisor decides from, across re-drives, until a claim ends it; a
// WaitingSince without Lost, or with a holder, is refused
// (docs/protocol.md, "A step never claimed has not failed").
func testUnclaimedRedrive(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-unclaimed", 1) // Pending, due for pick-up at T0+1m, never claimed
	k := key("o-unclaimed", 0)
	first := at(time.Minute)
	_, err := s.Rescue(ctx, sas.RescueParams{Key: k, From: sas.Pending, Attempt: 0, Now: first, PickupBy: first.Add(time.Minute),
		Actor: "sup", Reason: "never claimed", WaitingSince: first})
	require.ErrorIs(t, err, sas.ErrInvalid, "only a lost re-drive keeps how long it waited")
	for i, now := range []time.Time{first, first.Add(time.Minute)} {
		_, err = s.Rescue(ctx, sas.RescueParams{Key: k, From: sas.Pending, Attempt: 0, Now: now, PickupBy: now.Add(time.Minute),
			Actor: "sup", Reason: "never claimed", Lost: true, WaitingSince: first})
		require.NoError(t, err, "re-drive %d", i+1)
		got := get(t, s, "o-unclaimed").Steps[0]
		require.Equal(t, sas.Pending, got.ProcessState)
		require.Zero(t, got.FailureCount, "nothing ran: not a failure")
		require.Equal(t, first, got.WaitingSince)
		require.Equal(t, now.Add(time.Minute), got.DueAt)
	}
	due, err := s.FindDue(ctx, sas.FindDueParams{State: sas.Pending, Now: first.Add(2 * time.Minute)})
	require.NoError(t, err)
	require.Len(t, due.Records, 1)
	require.Equal(t, first, due.Records[0].WaitingSince, "projected: the supervisor decides from the index alone")
	r := claim(t, s, k, 0, "a", first.Add(2*time.Minute), first.Add(3*time.Minute))
	require.Zero(t, r.WaitingSince, "a claim ends the wait")
	require.Zero(t, get(t, s, "o-unclaimed").Steps[0].WaitingSince)
}

func testGiveUpResubmit(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-gu", 1)
	k := key("o-gu", 0)
	claim(t, s, k, 0, "a", T0, at(time.Minute))
	now := at(2 * time.Minute)
	r, err := s.GiveUp(ctx, sas.GiveUpParams{Key: k, From: sas.Processing, Attempt: 1, Now: now, Actor: "sup", Reason: "failure threshold reached"})
	require.NoError(t, err)
	require.Equal(t, sas.Error, r.ProcessState)
	require.Equal(t, 1, r.FailureCount)
	// What the give-up owed went out (the supervisor settles it).
	_, err = s.Settle(ctx, sas.SettleParams{Key: k, State: sas.Error, Attempt: 1})
	require.NoError(t, err)
	_, err = s.Resubmit(ctx, sas.ResubmitParams{Key: k, Attempt: 0, Now: now, PickupBy: now.Add(time.Minute), Actor: "op"})
	requireRace(t, err)
	r, err = s.Resubmit(ctx, sas.ResubmitParams{Key: k, Attempt: 1, Now: now, PickupBy: now.Add(time.Minute), Actor: "operator:alice", Reason: "card fixed"})
	require.NoError(t, err)
	require.Equal(t, sas.Pending, r.ProcessState)
	require.Zero(t, r.FailureCount)
	require.Equal(t, 2, r.Attempt, "a resubmit moves the attempt on: its round's events are new ones (issue 29, N5)")
	l, err := s.ListByState(ctx, sas.ListByStateParams{State: sas.Error})
	require.NoError(t, err)
	require.Empty(t, l.Records)
	due, err := s.FindDue(ctx, sas.FindDueParams{State: sas.Pending, Now: now.Add(time.Minute)})
	require.NoError(t, err)
	require.Len(t, due.Records, 1, "a resubmitted step nobody picks up is re-driven too")
	claim(t, s, k, 2, "b", now.Add(time.Second), now.Add(time.Minute))
	v := get(t, s, "o-gu")
	last := v.History[len(v.History)-1]
	require.Equal(t, "b", last.Actor)
	require.Equal(t, 3, last.Attempt)
	require.Equal(t, "operator:alice", v.History[len(v.History)-2].Actor)
}

func testFindDueExact(t *testing.T, h Harness) {
	s := h.New(t).Store
	want := map[sas.StepKey]bool{}
	for i := 0; i < 60; i++ {
		id := fmt.Sprintf("o-fd-%03d", i)
		submit(t, s, id, 2)
		k := key(id, 0)
		switch i % 3 {
		case 0: // expired
			claim(t, s, k, 0, "a", T0, at(time.Duration(10+i)*time.Second))
			want[k] = true
		case 1: // live
			claim(t, s, k, 0, "a", T0, at(time.Hour))
		case 2: // done
			claim(t, s, k, 0, "a", T0, at(10*time.Second))
			_, err := s.Complete(ctx, sas.CompleteParams{Key: k, Owner: "a", Attempt: 1, Now: at(time.Second)})
			require.NoError(t, err)
		}
	}
	now := at(10 * time.Minute)
	due, err := s.FindDue(ctx, sas.FindDueParams{State: sas.Processing, Now: now, Limit: 100})
	require.NoError(t, err)
	got := map[sas.StepKey]bool{}
	for i, r := range due.Records {
		require.Equal(t, sas.Processing, r.ProcessState)
		require.False(t, r.DueAt.After(now))
		require.Equal(t, 1, r.Attempt, "the index projects what the supervisor needs")
		require.Equal(t, "a", r.LockedBy)
		if i > 0 {
			require.False(t, r.DueAt.Before(due.Records[i-1].DueAt), "oldest deadline first")
		}
		got[r.Key()] = true
	}
	require.Equal(t, want, got, "exactly the expired steps")
	pend, err := s.FindDue(ctx, sas.FindDueParams{State: sas.Pending, Now: now})
	require.NoError(t, err)
	require.Empty(t, pend.Records, "steps waiting on a predecessor are never due")
	_, err = s.FindDue(ctx, sas.FindDueParams{State: sas.Processed, Now: now})
	require.ErrorIs(t, err, sas.ErrInvalid)
}

// testSweepCost: a sweep reads the due records and nothing else. The bound,
// asserted exactly: requests == index shards (one query each, one page), and
// items read == due records. It is the same for a table 100 times larger.
func testSweepCost(t *testing.T, h Harness) {
	const expired = 100
	sizes := []int{1_000, h.Large}
	var stats []sas.ReadStats
	for _, live := range sizes {
		f := h.New(t)
		require.NotNil(t, f.Load, "the sweep-cost test needs a bulk loader")
		var recs []sas.StepRecord
		for i := 0; i < live+expired; i++ {
			id := fmt.Sprintf("o-cost-%07d", i)
			r := sas.StepRecord{OrderID: id, Step: 0, StepName: "pay", Attempt: 1, CreatedAt: T0, UpdatedAt: T0,
				History: []sas.HistoryEntry{{At: T0, Actor: "load", To: sas.Processing, Attempt: 1}}}
			switch {
			case i < expired: // the same 100 expired steps in both tables
				r.ProcessState, r.LockedBy, r.CompleteBy = sas.Processing, "a", at(time.Duration(i)*time.Second)
				r.DueAt = r.CompleteBy
			case i%2 == 0: // live, in the index with a future deadline
				r.ProcessState, r.LockedBy, r.CompleteBy = sas.Processing, "a", at(time.Hour)
				r.DueAt = r.CompleteBy
			default: // done, out of the index
				r.ProcessState = sas.Processed
				r.History = append(r.History, sas.HistoryEntry{At: T0, Actor: "a", From: sas.Processing, To: sas.Processed, Attempt: 1})
			}
			r.Shard = sas.ShardFor(r.Key(), f.Shards)
			recs = append(recs, r)
		}
		start := time.Now()
		require.NoError(t, f.Load(ctx, recs))
		t.Logf("loaded %d records in %v", len(recs), time.Since(start).Round(time.Millisecond))
		var before sas.ReadStats
		if f.Counted != nil {
			before = f.Counted()
		}
		due, err := f.Store.FindDue(ctx, sas.FindDueParams{State: sas.Processing, Now: at(30 * time.Minute), Limit: 1000})
		require.NoError(t, err)
		require.Len(t, due.Records, expired)
		got := due.Stats
		if f.Counted != nil {
			after := f.Counted()
			below := sas.ReadStats{Requests: after.Requests - before.Requests, ItemsRead: after.ItemsRead - before.ItemsRead}
			require.Equal(t, below, got, "the store's own stats agree with the SDK-level count")
		}
		require.Equal(t, f.Shards, got.Requests, "one query per index shard")
		require.Equal(t, expired, got.ItemsRead, "only the expired records are read")
		stats = append(stats, got)
		t.Logf("sweep over %d records (%d expired): %d requests, %d items read", live+expired, expired, got.Requests, got.ItemsRead)
	}
	require.Equal(t, stats[0], stats[1], "a sweep costs the same over %d and %d records", sizes[0], sizes[1])
}

func testListByState(t *testing.T, h Harness) {
	s := h.New(t).Store
	want := map[sas.StepKey]bool{}
	for i := 0; i < 25; i++ {
		id := fmt.Sprintf("o-list-%02d", i)
		submit(t, s, id, 1)
		k := key(id, 0)
		claim(t, s, k, 0, "a", T0, at(time.Minute))
		_, err := s.Fail(ctx, sas.FailParams{Key: k, Owner: "a", Attempt: 1, Now: at(time.Duration(i) * time.Second), Reason: "no"})
		require.NoError(t, err)
		want[k] = true
	}
	submit(t, s, "o-list-live", 1)
	got := map[sas.StepKey]bool{}
	cursor, pages := "", 0
	for {
		page, err := s.ListByState(ctx, sas.ListByStateParams{State: sas.Error, Limit: 2, Cursor: cursor})
		require.NoError(t, err)
		pages++
		for _, r := range page.Records {
			require.Equal(t, sas.Error, r.ProcessState)
			require.False(t, got[r.Key()], "listed twice: %s", r.Key())
			got[r.Key()] = true
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
		require.Less(t, pages, 100, "paging does not end")
	}
	require.Equal(t, want, got)
	require.Greater(t, pages, 1, "more than one page at limit 2")
	_, err := s.ListByState(ctx, sas.ListByStateParams{State: sas.Processed})
	require.ErrorIs(t, err, sas.ErrInvalid)
	_, err = s.ListByState(ctx, sas.ListByStateParams{State: sas.Error, Cursor: "garbage!"})
	require.ErrorIs(t, err, sas.ErrInvalid)
	pend, err := s.ListByState(ctx, sas.ListByStateParams{State: sas.Pending})
	require.NoError(t, err)
	require.Len(t, pend.Records, 1)
}

func testNotFound(t *testing.T, h Harness) {
	s := h.New(t).Store
	_, err := s.GetOrder(ctx, "missing")
	require.ErrorIs(t, err, sas.ErrNotFound)
	_, err = s.Complete(ctx, sas.CompleteParams{Key: key("missing", 0), Owner: "a", Attempt: 1, Now: T0})
	require.ErrorIs(t, err, sas.ErrNotFound)
	_, err = s.Rescue(ctx, sas.RescueParams{Key: key("missing", 0), From: sas.Processing, Attempt: 1, Now: T0, PickupBy: at(time.Minute), Actor: "sup"})
	require.ErrorIs(t, err, sas.ErrNotFound)
}

// testRunTiming: the history entry an agent's outcome writes keeps what the
// agent measured of the run (sas.RunTiming: done, failed, transient, its
// last attempt's give-up, an undo), a measured 0 included; an outcome
// without it (an older agent) and every other entry read back without.
func testRunTiming(t *testing.T, h Harness) {
	s := h.New(t).Store
	run := func(queued, ran time.Duration) sas.RunTiming {
		return sas.RunTiming{Queued: sas.MillisOf(queued), Ran: sas.MillisOf(ran)}
	}
	newest := func(id string, step int) sas.HistoryEntry {
		t.Helper()
		hs := get(t, s, id).Steps[step].History
		return hs[len(hs)-1]
	}

	submit(t, s, "o-run", 2)
	k0, k1 := key("o-run", 0), key("o-run", 1)
	claim(t, s, k0, 0, "a", T0, at(time.Minute))
	_, err := s.Rescue(ctx, sas.RescueParams{Key: k0, From: sas.Processing, Attempt: 1, Now: at(time.Second), PickupBy: at(time.Minute),
		Actor: "a", Holder: "a", Reason: "attempt 1 failed", Run: run(1500*time.Millisecond, 20*time.Second)})
	require.NoError(t, err)
	require.Equal(t, run(1500*time.Millisecond, 20*time.Second), newest("o-run", 0).Run, "transient")
	claim(t, s, k0, 1, "a", at(2*time.Second), at(time.Minute))
	_, err = s.Complete(ctx, sas.CompleteParams{Key: k0, Owner: "a", Attempt: 2, Now: at(3 * time.Second), Run: run(0, 250*time.Millisecond),
		Next: &sas.ClaimParams{Key: k1, Attempt: 0, Owner: "a", Now: at(3 * time.Second), CompleteBy: at(time.Minute)}})
	require.NoError(t, err)
	require.Equal(t, run(0, 250*time.Millisecond), newest("o-run", 0).Run, "done, with its successor's claim; a measured 0 kept")
	require.False(t, newest("o-run", 1).Run.Known(), "a claim has none")
	_, err = s.Fail(ctx, sas.FailParams{Key: k1, Owner: "a", Attempt: 1, Now: at(4 * time.Second), Reason: "refused", Run: run(time.Second, 2*time.Second)})
	require.NoError(t, err)
	require.Equal(t, run(time.Second, 2*time.Second), newest("o-run", 1).Run, "failed")
	_, err = s.Claim(ctx, sas.ClaimParams{Key: k1, From: sas.Error, Attempt: 1, Owner: "a", Now: at(5 * time.Second), CompleteBy: at(time.Minute)})
	require.NoError(t, err)
	_, err = s.Complete(ctx, sas.CompleteParams{Key: k1, Owner: "a", Attempt: 2, Now: at(6 * time.Second), Compensation: true, Run: run(3*time.Second, 4*time.Second)})
	require.NoError(t, err)
	require.Equal(t, run(3*time.Second, 4*time.Second), newest("o-run", 1).Run, "an undo done")

	submit(t, s, "o-run2", 1)
	k := key("o-run2", 0)
	claim(t, s, k, 0, "a", T0, at(time.Minute))
	_, err = s.GiveUp(ctx, sas.GiveUpParams{Key: k, From: sas.Processing, Attempt: 1, Now: at(time.Second), Actor: "a", Holder: "a",
		Reason: "the last attempt failed", Run: sas.RunTiming{Ran: sas.MillisOf(time.Minute)}})
	require.NoError(t, err)
	e := newest("o-run2", 0)
	require.True(t, e.Run.Queued.IsZero(), "not measured: unknown, not 0")
	d, ok := e.Run.Ran.Get()
	require.True(t, ok)
	require.Equal(t, time.Minute, d, "the last attempt's give-up")

	submit(t, s, "o-run3", 1)
	k = key("o-run3", 0)
	claim(t, s, k, 0, "a", T0, at(time.Minute))
	_, err = s.Complete(ctx, sas.CompleteParams{Key: k, Owner: "a", Attempt: 1, Now: at(time.Second)})
	require.NoError(t, err)
	for _, h := range get(t, s, "o-run3").Steps[0].History {
		require.False(t, h.Run.Known(), "an outcome without a timing (an older agent), and every other entry: none")
	}
}
