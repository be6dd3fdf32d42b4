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
