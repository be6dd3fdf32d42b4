package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// Branches in parallel (docs/workflows.md, "Branches in parallel"): a
// completion that starts several steps claims them all in its own write,
// fenced on the order's other steps as its writer read them; and the order
// keeps its graph.

// testCompleteStartsBranches: one completion claims several steps, or
// none of them and nothing at all; the order's graph is kept.
func testCompleteStartsBranches(t *testing.T, h Harness) {
	s := h.New(t).Store
	o := order("o-fork", 4)
	o.After = [][]int{{}, {0}, {0}, {1, 2}}
	res, err := s.Submit(ctx, sas.SubmitParams{Order: o, Now: T0, PickupBy: at(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, o.After, res.View.Order.After, "the submission returns the graph")
	require.Equal(t, o.After, get(t, s, "o-fork").Order.After, "a read returns the graph")
	require.Nil(t, submit(t, s, "o-line", 2).Order.After, "a straight line has none")

	claim(t, s, key("o-fork", 0), 0, "a", T0, at(time.Minute))
	next := func(step int) sas.ClaimParams {
		return sas.ClaimParams{Key: key("o-fork", step), Owner: "b", Now: at(time.Second), CompleteBy: at(time.Minute)}
	}
	n1 := next(1)
	recs, err := s.Complete(ctx, sas.CompleteParams{Key: key("o-fork", 0), Owner: "a", Attempt: 1, Now: at(time.Second),
		Next: &n1, More: []sas.ClaimParams{next(2)}})
	require.NoError(t, err)
	require.Len(t, recs, 3)
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processing, sas.Processing},
		[]sas.ProcessState{recs[0].ProcessState, recs[1].ProcessState, recs[2].ProcessState})
	require.Equal(t, []int{0, 1, 2}, []int{recs[0].Step, recs[1].Step, recs[2].Step})
	require.Equal(t, "b", recs[2].LockedBy)
	v := get(t, s, "o-fork")
	require.Equal(t, sas.Processing, v.Steps[2].ProcessState)
	require.Equal(t, 1, v.Steps[2].Attempt)

	// One of the claims cannot be made: nothing is written.
	o2 := order("o-fork2", 3)
	o2.After = [][]int{{}, {0}, {0}}
	_, err = s.Submit(ctx, sas.SubmitParams{Order: o2, Now: T0, PickupBy: at(time.Minute)})
	require.NoError(t, err)
	claim(t, s, key("o-fork2", 0), 0, "a", T0, at(time.Minute))
	claim(t, s, key("o-fork2", 2), 0, "intruder", T0, at(time.Minute))
	m1 := sas.ClaimParams{Key: key("o-fork2", 1), Owner: "b", Now: at(time.Second), CompleteBy: at(time.Minute)}
	m2 := sas.ClaimParams{Key: key("o-fork2", 2), Owner: "b", Now: at(time.Second), CompleteBy: at(time.Minute)}
	_, err = s.Complete(ctx, sas.CompleteParams{Key: key("o-fork2", 0), Owner: "a", Attempt: 1, Now: at(time.Second), Next: &m1, More: []sas.ClaimParams{m2}})
	re := requireRace(t, err)
	require.Equal(t, key("o-fork2", 2), re.Key, "the claim that could not be made")
	v = get(t, s, "o-fork2")
	require.Equal(t, []sas.ProcessState{sas.Processing, sas.Pending, sas.Processing},
		[]sas.ProcessState{v.Steps[0].ProcessState, v.Steps[1].ProcessState, v.Steps[2].ProcessState}, "all or nothing")

	// A claim of the completed step itself, or of a step twice, is invalid.
	_, err = s.Complete(ctx, sas.CompleteParams{Key: key("o-fork2", 0), Owner: "a", Attempt: 1, Now: at(time.Second), Next: &m1, More: []sas.ClaimParams{m1}})
	require.ErrorIs(t, err, sas.ErrInvalid)
	_, err = s.Complete(ctx, sas.CompleteParams{Key: key("o-fork2", 0), Owner: "a", Attempt: 1, Now: at(time.Second), More: []sas.ClaimParams{m1}})
	require.ErrorIs(t, err, sas.ErrInvalid)
}

// testCompleteFencedOnSiblings: a completion fenced on a sibling as read
// is made only while the sibling is in that state; else it loses the race
// to the sibling, writing nothing. Of two branches that complete at once,
// each fenced on the other in flight, exactly one wins.
func testCompleteFencedOnSiblings(t *testing.T, h Harness) {
	s := h.New(t).Store
	o := order("o-sib", 3)
	o.After = [][]int{{}, {}, {0, 1}}
	_, err := s.Submit(ctx, sas.SubmitParams{Order: o, Now: T0, PickupBy: at(time.Minute)})
	require.NoError(t, err)
	claim(t, s, key("o-sib", 0), 0, "a", T0, at(time.Minute))
	claim(t, s, key("o-sib", 1), 0, "b", T0, at(time.Minute))

	// Wrong as read: loses to the sibling, nothing written.
	_, err = s.Complete(ctx, sas.CompleteParams{Key: key("o-sib", 0), Owner: "a", Attempt: 1, Now: at(time.Second),
		Siblings: []sas.StepSeen{{Step: 1, State: sas.Pending}}})
	re := requireRace(t, err)
	require.Equal(t, key("o-sib", 1), re.Key)
	require.NotNil(t, re.Current)
	require.Equal(t, sas.Processing, re.Current.ProcessState)
	require.Equal(t, sas.Processing, get(t, s, "o-sib").Steps[0].ProcessState, "nothing written")
	_, err = s.Complete(ctx, sas.CompleteParams{Key: key("o-sib", 0), Owner: "a", Attempt: 1, Now: at(time.Second),
		Siblings: []sas.StepSeen{{Step: 0, State: sas.Processing}}})
	require.ErrorIs(t, err, sas.ErrInvalid, "the completed step is no sibling")

	// Both at once, each fenced on the other as Processing: one wins.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, owner := range []string{"a", "b"} {
		wg.Go(func() {
			_, errs[i] = s.Complete(ctx, sas.CompleteParams{Key: key("o-sib", i), Owner: owner, Attempt: 1, Now: at(2 * time.Second),
				Siblings: []sas.StepSeen{{Step: 1 - i, State: sas.Processing}}})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
		}
	}
	// DynamoDB may cancel both (a TransactionConflict, retried by the
	// message's redelivery): never may both be written.
	require.LessOrEqual(t, won, 1, "two branches completing at once, each fenced on the other: at most one is written")
	for _, err := range errs {
		if err != nil && !errors.Is(err, sas.ErrLostRace) {
			require.NotErrorIs(t, err, sas.ErrInvalid)
		}
	}
	v := get(t, s, "o-sib")
	processed := 0
	for _, r := range v.Steps[:2] {
		if r.ProcessState == sas.Processed {
			processed++
		}
	}
	require.Equal(t, won, processed)
}

// testSiblingsFenceSeesACancelsMark: a cancel's mark moves no state, yet
// a completion (or a claim) fenced on a sibling as read, unmarked, loses
// once the sibling is marked: the branch that completes after a cancel
// marked its sibling claims nothing (docs/protocol.md, "Cancellation").
// Fenced on the mark as read, it is made.
func testSiblingsFenceSeesACancelsMark(t *testing.T, h Harness) {
	s := h.New(t).Store
	o := order("o-sibcx", 3)
	o.After = [][]int{{}, {}, {0}}
	_, err := s.Submit(ctx, sas.SubmitParams{Order: o, Now: T0, PickupBy: at(time.Minute)})
	require.NoError(t, err)
	claim(t, s, key("o-sibcx", 0), 0, "a", T0, at(time.Minute))
	claim(t, s, key("o-sibcx", 1), 0, "b", T0, at(time.Minute))
	seen := get(t, s, "o-sibcx").Steps[1]
	_, err = s.Cancel(ctx, sas.CancelParams{Key: key("o-sibcx", 1), From: sas.Processing, Attempt: 1, Now: at(time.Second), Actor: "submitter:app"})
	require.NoError(t, err)

	next := sas.ClaimParams{Key: key("o-sibcx", 2), Owner: "a", Now: at(2 * time.Second), CompleteBy: at(time.Minute)}
	_, err = s.Complete(ctx, sas.CompleteParams{Key: key("o-sibcx", 0), Owner: "a", Attempt: 1, Now: at(2 * time.Second), Graph: true,
		Next: &next, Siblings: []sas.StepSeen{sas.SeenOf(seen)}})
	re := requireRace(t, err)
	require.Equal(t, key("o-sibcx", 1), re.Key, "lost to the marked sibling")
	require.NotNil(t, re.Current)
	require.True(t, re.Current.Cancelled)
	v := get(t, s, "o-sibcx")
	require.Equal(t, sas.Processing, v.Steps[0].ProcessState, "nothing written")
	require.Equal(t, sas.Pending, v.Steps[2].ProcessState, "nothing claimed")
	_, err = s.Claim(ctx, sas.ClaimParams{Key: key("o-sibcx", 2), Owner: "a", Now: at(2 * time.Second), CompleteBy: at(time.Minute),
		Siblings: []sas.StepSeen{sas.SeenOf(seen)}})
	require.ErrorIs(t, err, sas.ErrLostRace, "a claim's fence sees the mark too")

	marked := v.Steps[1]
	recs, err := s.Complete(ctx, sas.CompleteParams{Key: key("o-sibcx", 0), Owner: "a", Attempt: 1, Now: at(3 * time.Second), Graph: true,
		Siblings: []sas.StepSeen{sas.SeenOf(marked)}})
	require.NoError(t, err, "fenced on the mark as read")
	require.Equal(t, sas.Processed, recs[0].ProcessState)
}

// testCompleteInAGraphSkipsAndClaims: a completion in a graph (Graph)
// claims the branches that run and skips those whose conditions are false,
// wherever they stand in the order (not only the steps after it in line),
// fenced on a sibling as read, in one write: returned as the step, its
// claims, then its skips. A skip that cannot be made (the step was claimed
// meanwhile) or a sibling that moved writes nothing; a failed skip stands
// alone.
func testCompleteInAGraphSkipsAndClaims(t *testing.T, h Harness) {
	s := h.New(t).Store
	o := order("o-gsk", 5)
	o.After = [][]int{{}, {0}, {0}, {}, {1, 2, 3}}
	_, err := s.Submit(ctx, sas.SubmitParams{Order: o, Now: T0, PickupBy: at(time.Minute)})
	require.NoError(t, err)
	claim(t, s, key("o-gsk", 0), 0, "a", T0, at(time.Minute))
	claim(t, s, key("o-gsk", 3), 0, "c", T0, at(time.Minute))
	n2 := sas.ClaimParams{Key: key("o-gsk", 2), Owner: "b", Now: at(time.Second), CompleteBy: at(time.Minute)}
	complete := func(p sas.CompleteParams) ([]sas.StepRecord, error) {
		p.Key, p.Owner, p.Attempt, p.Now, p.Graph = key("o-gsk", 0), "a", 1, at(time.Second), true
		return s.Complete(ctx, p)
	}
	skip1 := []sas.Skip{{Step: 1, Reason: "skipped: its condition payload.flight is false"}}

	// Invalid: a skip that is also claimed or fenced; a failed skip beside a claim.
	_, err = complete(sas.CompleteParams{Next: &n2, Skip: []sas.Skip{{Step: 2}}})
	require.ErrorIs(t, err, sas.ErrInvalid)
	_, err = complete(sas.CompleteParams{Skip: []sas.Skip{{Step: 3}}, Siblings: []sas.StepSeen{{Step: 3, State: sas.Processing}}})
	require.ErrorIs(t, err, sas.ErrInvalid)
	_, err = complete(sas.CompleteParams{Next: &n2, Skip: []sas.Skip{{Step: 1, Failed: true, Reason: "x"}}})
	require.ErrorIs(t, err, sas.ErrInvalid)

	// The sibling moved: nothing written.
	_, err = complete(sas.CompleteParams{Next: &n2, Skip: skip1, Siblings: []sas.StepSeen{{Step: 3, State: sas.Pending}}})
	require.Equal(t, key("o-gsk", 3), requireRace(t, err).Key)
	require.Equal(t, []sas.ProcessState{sas.Processing, sas.Pending, sas.Pending, sas.Processing, sas.Pending}, states(get(t, s, "o-gsk")), "nothing written")

	recs, err := complete(sas.CompleteParams{Next: &n2, Skip: skip1, Siblings: []sas.StepSeen{{Step: 3, State: sas.Processing}}})
	require.NoError(t, err)
	require.Len(t, recs, 3)
	require.Equal(t, []int{0, 2, 1}, []int{recs[0].Step, recs[1].Step, recs[2].Step}, "the step, its claims, its skips")
	v := get(t, s, "o-gsk")
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Skipped, sas.Processing, sas.Processing, sas.Pending}, states(v))
	require.Zero(t, v.Steps[1].Attempt, "a skipped step is never claimed")
	require.True(t, v.Steps[1].DueAt.IsZero())
	require.Equal(t, "skipped: its condition payload.flight is false", v.Steps[1].LastHistoryReason())

	// A skip of a step claimed meanwhile loses the race: nothing written.
	recs, err = s.Complete(ctx, sas.CompleteParams{Key: key("o-gsk", 3), Owner: "c", Attempt: 1, Now: at(2 * time.Second), Graph: true,
		Skip: []sas.Skip{{Step: 2, Reason: "x"}}})
	require.Equal(t, key("o-gsk", 2), requireRace(t, err).Key, "step 2 was claimed: it cannot be skipped")
	require.Nil(t, recs)
	require.Equal(t, sas.Processing, get(t, s, "o-gsk").Steps[3].ProcessState, "nothing written")

	// A failed skip alone: the step in Error by its condition, never claimed.
	recs, err = s.Complete(ctx, sas.CompleteParams{Key: key("o-gsk", 3), Owner: "c", Attempt: 1, Now: at(2 * time.Second), Graph: true,
		Skip: []sas.Skip{{Step: 4, Failed: true, Reason: "ConditionFailed: no such key"}}})
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.Equal(t, sas.Error, recs[1].ProcessState)
	require.Equal(t, sas.ByCondition, recs[1].FailedBy)
	require.Zero(t, recs[1].Attempt)
}
