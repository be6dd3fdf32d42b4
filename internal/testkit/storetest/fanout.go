package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// testFanOutWindow: a claimed step starts its fan-out in one write (the
// count on the step, which leaves the index, and the first window of
// elements claimed); an element's completion counts it on its step and
// claims the next element in one write, all or nothing; every write is
// fenced; the order's view never holds the elements, which are listed apart
// in index order, a page at a time; elements are due as steps are.
func testFanOutWindow(t *testing.T, h Harness) {
	s := h.New(t).Store
	fs, ok := s.(sas.FanOutStore)
	if !ok {
		t.Skipf("%T keeps no fan-out elements", s)
	}
	submit(t, s, "o-fan", 2)
	k := key("o-fan", 0)
	claim(t, s, k, 0, "a", T0, at(time.Minute))
	item := func(i int) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"sku":"S-%d"}`, i)) }
	window := func(n int) []sas.ElementClaim {
		var cs []sas.ElementClaim
		for i := range n {
			cs = append(cs, sas.ElementClaim{Index: i, Item: item(i), CompleteBy: at(time.Minute)})
		}
		return cs
	}
	start := sas.StartFanOutParams{Key: k, Owner: "a", Attempt: 1, Now: at(time.Second), Count: 5, Claims: window(2), StepName: "step0"}

	_, err := fs.StartFanOut(ctx, sas.StartFanOutParams{Key: k, Owner: "b", Attempt: 1, Now: at(time.Second), Count: 5, Claims: window(2), StepName: "step0"})
	require.ErrorIs(t, err, sas.ErrLostRace, "only the step's holder starts it")
	recs, err := fs.StartFanOut(ctx, start)
	require.NoError(t, err)
	require.Len(t, recs, 3)
	require.Equal(t, 5, recs[0].ForEachCount)
	require.Equal(t, 0, recs[0].ForEachDone)
	require.Equal(t, sas.Processing, recs[0].ProcessState)
	require.Equal(t, "a", recs[0].LockedBy, "the step keeps its holder")
	require.True(t, recs[0].DueAt.IsZero(), "the step leaves the index: its elements carry the deadlines")
	for i, e := range recs[1:] {
		require.Equal(t, sas.ElementStep(0, i), e.Step)
		require.Equal(t, "step0", e.StepName)
		require.Equal(t, sas.Processing, e.ProcessState)
		require.Equal(t, 1, e.Attempt)
		require.Equal(t, "a", e.LockedBy)
		require.Equal(t, at(time.Minute), e.DueAt)
		require.JSONEq(t, string(item(i)), string(e.Item))
	}
	_, err = fs.StartFanOut(ctx, start)
	require.ErrorIs(t, err, sas.ErrLostRace, "a fan-out starts once")
	v := get(t, s, "o-fan")
	require.Len(t, v.Steps, 2, "the order's view holds its steps alone")

	due, err := s.FindDue(ctx, sas.FindDueParams{State: sas.Processing, Now: at(time.Hour)})
	require.NoError(t, err)
	var dueSteps []int
	for _, r := range due.Records {
		dueSteps = append(dueSteps, r.Step)
	}
	require.ElementsMatch(t, []int{sas.ElementStep(0, 0), sas.ElementStep(0, 1)}, dueSteps, "elements are due, their step is not")

	e0, e1 := key("o-fan", sas.ElementStep(0, 0)), key("o-fan", sas.ElementStep(0, 1))
	next := func(i int) *sas.ElementClaim {
		return &sas.ElementClaim{Index: i, Item: item(i), CompleteBy: at(2 * time.Minute)}
	}
	complete := func(k sas.StepKey, owner string, n *sas.ElementClaim, result string) ([]sas.StepRecord, error) {
		return fs.CompleteElement(ctx, sas.CompleteElementParams{Key: k, Owner: owner, Attempt: 1, Now: at(2 * time.Second),
			Result: json.RawMessage(result), Next: n, StepName: "step0"})
	}
	_, err = complete(e0, "b", next(2), `"r0"`)
	require.ErrorIs(t, err, sas.ErrLostRace, "only the element's holder completes it")
	recs, err = complete(e0, "a", next(2), `"r0"`)
	require.NoError(t, err)
	require.Len(t, recs, 3)
	require.Equal(t, sas.Processed, recs[0].ProcessState)
	require.Equal(t, `"r0"`, string(recs[0].Result))
	require.True(t, recs[0].DueAt.IsZero())
	require.Equal(t, 1, recs[1].ForEachDone)
	require.Equal(t, sas.ElementStep(0, 2), recs[2].Step)
	require.Equal(t, sas.Processing, recs[2].ProcessState)

	_, err = complete(e0, "a", next(2), `"r0"`)
	require.ErrorIs(t, err, sas.ErrLostRace, "an element completes once")
	// A next element that exists already refuses the whole write.
	_, err = complete(e1, "a", next(2), `"r1"`)
	require.ErrorIs(t, err, sas.ErrLostRace)
	r1, err := s.GetStep(ctx, e1)
	require.NoError(t, err)
	require.Equal(t, sas.Processing, r1.ProcessState, "nothing of a refused write is made")
	st, err := s.GetStep(ctx, k)
	require.NoError(t, err)
	require.Equal(t, 1, st.ForEachDone)

	recs, err = complete(e1, "a", next(3), `"r1"`)
	require.NoError(t, err)
	require.Equal(t, 2, recs[1].ForEachDone)

	var listed []int
	cursor := ""
	for range 10 {
		page, err := fs.ListElements(ctx, sas.ListElementsParams{Key: k, Limit: 2, Cursor: cursor})
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Records), 2)
		for _, r := range page.Records {
			listed = append(listed, r.Step)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	require.Equal(t, []int{sas.ElementStep(0, 0), sas.ElementStep(0, 1), sas.ElementStep(0, 2), sas.ElementStep(0, 3)}, listed, "in index order")
	page, err := fs.ListElements(ctx, sas.ListElementsParams{Key: key("o-fan", 1)})
	require.NoError(t, err)
	require.Empty(t, page.Records, "another step's elements are its own")
}

// testFanOutCountsNoMoreThanItsElements: a step whose elements are all
// counted, or that is no longer running, counts no more.
func testFanOutCountsNoMoreThanItsElements(t *testing.T, h Harness) {
	s := h.New(t).Store
	fs, ok := s.(sas.FanOutStore)
	if !ok {
		t.Skipf("%T keeps no fan-out elements", s)
	}
	submit(t, s, "o-one", 1)
	k := key("o-one", 0)
	claim(t, s, k, 0, "a", T0, at(time.Minute))
	_, err := fs.StartFanOut(ctx, sas.StartFanOutParams{Key: k, Owner: "a", Attempt: 1, Now: at(time.Second), Count: 1, StepName: "step0",
		Claims: []sas.ElementClaim{{Index: 0, Item: json.RawMessage(`1`), CompleteBy: at(time.Minute)}}})
	require.NoError(t, err)
	// The step is failed under its elements (an operator, a give-up).
	_, err = s.Fail(ctx, sas.FailParams{Key: k, Owner: "a", Attempt: 1, Now: at(time.Second), Reason: "stopped"})
	require.NoError(t, err)
	_, err = fs.CompleteElement(ctx, sas.CompleteElementParams{Key: key("o-one", sas.ElementStep(0, 0)), Owner: "a", Attempt: 1, Now: at(2 * time.Second), StepName: "step0"})
	require.ErrorIs(t, err, sas.ErrLostRace, "a step no longer running counts nothing")
	e, err := s.GetStep(ctx, key("o-one", sas.ElementStep(0, 0)))
	require.NoError(t, err)
	require.Equal(t, sas.Processing, e.ProcessState, "and the element's completion is not made without it")
}

// testFanOutStopAndUndo: a fan-out that fails is stopped and undone by the
// writes a step's failure and undo make, on its elements' records
// (docs/decisions.md, "Fan-out elements are records of their own"): a
// marked element (CancelStep) is refused its counted completion, even while
// its step runs, and settles alone (Complete with Cancelled, its result
// kept); one handed back is turned away; elements fail, are claimed for
// their undo from Processed or Error, and complete or fail it; none of it
// is ever in the order's view.
func testFanOutStopAndUndo(t *testing.T, h Harness) {
	s := h.New(t).Store
	fs, ok := s.(sas.FanOutStore)
	if !ok {
		t.Skipf("%T keeps no fan-out elements", s)
	}
	submit(t, s, "o-stop", 1)
	k := key("o-stop", 0)
	claim(t, s, k, 0, "a", T0, at(time.Minute))
	var window []sas.ElementClaim
	for i := range 3 {
		window = append(window, sas.ElementClaim{Index: i, Item: json.RawMessage(fmt.Sprint(i)), CompleteBy: at(time.Minute)})
	}
	_, err := fs.StartFanOut(ctx, sas.StartFanOutParams{Key: k, Owner: "a", Attempt: 1, Now: at(time.Second), Count: 4, StepName: "step0", Claims: window})
	require.NoError(t, err)
	e0, e1, e2 := key("o-stop", sas.ElementStep(0, 0)), key("o-stop", sas.ElementStep(0, 1)), key("o-stop", sas.ElementStep(0, 2))

	// Element 1 is marked while its step runs: its counted completion is
	// refused, and nothing of that write is made.
	marked, err := s.Cancel(ctx, sas.CancelParams{Key: e1, From: sas.Processing, Attempt: 1, Now: at(2 * time.Second), Actor: "a", Reason: "its fan-out stopped"})
	require.NoError(t, err)
	require.True(t, marked.Cancelled)
	require.Equal(t, sas.Processing, marked.ProcessState)
	_, err = fs.CompleteElement(ctx, sas.CompleteElementParams{Key: e1, Owner: "a", Attempt: 1, Now: at(3 * time.Second), StepName: "step0",
		Next: &sas.ElementClaim{Index: 3, Item: json.RawMessage(`3`), CompleteBy: at(time.Minute)}})
	require.ErrorIs(t, err, sas.ErrLostRace, "a marked element counts nothing")
	st, err := s.GetStep(ctx, k)
	require.NoError(t, err)
	require.Equal(t, 0, st.ForEachDone)
	_, err = s.GetStep(ctx, key("o-stop", sas.ElementStep(0, 3)))
	require.ErrorIs(t, err, sas.ErrNotFound, "and claims nothing")

	// Element 0 is refused; the step fails (its window stops).
	failed, err := s.Fail(ctx, sas.FailParams{Key: e0, Owner: "a", Attempt: 1, Now: at(3 * time.Second), Reason: "out of stock"})
	require.NoError(t, err)
	require.Equal(t, sas.Error, failed.ProcessState)
	stopped, err := s.Fail(ctx, sas.FailParams{Key: k, Owner: "a", Attempt: 1, Now: at(3 * time.Second), Reason: "element 0 failed", Effect: true})
	require.NoError(t, err)
	require.Equal(t, 4, stopped.ForEachCount, "the step keeps its count")
	require.True(t, stopped.UndoOwed)

	// Element 1 settles alone, its result kept for its undo.
	recs, err := s.Complete(ctx, sas.CompleteParams{Key: e1, Owner: "a", Attempt: 1, Now: at(4 * time.Second), Result: json.RawMessage(`"r1"`), Cancelled: true})
	require.NoError(t, err)
	require.Equal(t, sas.Processed, recs[0].ProcessState)
	require.Equal(t, `"r1"`, string(recs[0].Result))

	// Element 2 was lost: rescued, then turned away.
	rescued, err := s.Rescue(ctx, sas.RescueParams{Key: e2, From: sas.Processing, Attempt: 1, Now: at(2 * time.Minute), PickupBy: at(3 * time.Minute),
		Actor: "sup", Reason: "deadline passed"})
	require.NoError(t, err)
	require.Equal(t, sas.Pending, rescued.ProcessState)
	away, err := s.Cancel(ctx, sas.CancelParams{Key: e2, From: sas.Pending, Attempt: rescued.Attempt, Now: at(2 * time.Minute), Actor: "a", Reason: "its fan-out stopped"})
	require.NoError(t, err)
	require.Equal(t, sas.Error, away.ProcessState)
	require.True(t, away.Cancelled)

	// The undo: the step's, then each element's, highest first.
	_, err = s.Claim(ctx, sas.ClaimParams{Key: k, From: sas.Error, Attempt: 1, Owner: "a", Now: at(3 * time.Minute), CompleteBy: at(4 * time.Minute)})
	require.NoError(t, err)
	for _, c := range []struct {
		k    sas.StepKey
		from sas.ProcessState
		ok   bool
	}{{e2, sas.Error, true}, {e1, sas.Processed, true}, {e0, sas.Error, false}} {
		cur, err := s.GetStep(ctx, c.k)
		require.NoError(t, err)
		got, err := s.Claim(ctx, sas.ClaimParams{Key: c.k, From: c.from, Attempt: cur.Attempt, Owner: "a", Now: at(3 * time.Minute), CompleteBy: at(4 * time.Minute)})
		require.NoError(t, err)
		require.Equal(t, sas.Compensating, got.ProcessState)
		if c.k == e1 {
			require.Equal(t, `"r1"`, string(got.Result), "an undo keeps its element's result")
		}
		if c.ok {
			recs, err := s.Complete(ctx, sas.CompleteParams{Key: c.k, Owner: "a", Attempt: got.Attempt, Now: at(3 * time.Minute), Compensation: true})
			require.NoError(t, err)
			require.Equal(t, sas.Compensated, recs[0].ProcessState)
			continue
		}
		bad, err := s.Fail(ctx, sas.FailParams{Key: c.k, Owner: "a", Attempt: got.Attempt, Now: at(3 * time.Minute), Compensation: true, Reason: "refund refused"})
		require.NoError(t, err)
		require.Equal(t, sas.CompensationFailed, bad.ProcessState)
	}
	v := get(t, s, "o-stop")
	require.Len(t, v.Steps, 1, "the order's view holds its step alone")
	page, err := fs.ListElements(ctx, sas.ListElementsParams{Key: k})
	require.NoError(t, err)
	var states []sas.ProcessState
	for _, r := range page.Records {
		states = append(states, r.ProcessState)
	}
	require.Equal(t, []sas.ProcessState{sas.CompensationFailed, sas.Compensated, sas.Compensated}, states)
}

// testElementClaimFencedOnItsFanOut: an element's claim of its next attempt
// (from Pending: handed back after a transient outcome, or rescued) is
// fenced on its fan-out step running, Processing and unmarked
// (sas.ClaimParams.Fences). Once the step is failed (stopped) or marked
// (cancelled), the claim loses the race to the step, whatever the element
// looks like, and nothing is written; its undo's claim is not fenced so.
func testElementClaimFencedOnItsFanOut(t *testing.T, h Harness) {
	s := h.New(t).Store
	fs, ok := s.(sas.FanOutStore)
	if !ok {
		t.Skipf("%T keeps no fan-out elements", s)
	}
	start := func(id string) (sas.StepKey, []sas.StepKey) {
		submit(t, s, id, 1)
		k := key(id, 0)
		claim(t, s, k, 0, "a", T0, at(time.Minute))
		var window []sas.ElementClaim
		var els []sas.StepKey
		for i := range 2 {
			window = append(window, sas.ElementClaim{Index: i, Item: json.RawMessage(fmt.Sprint(i)), CompleteBy: at(time.Minute)})
			els = append(els, key(id, sas.ElementStep(0, i)))
		}
		_, err := fs.StartFanOut(ctx, sas.StartFanOutParams{Key: k, Owner: "a", Attempt: 1, Now: at(time.Second), Count: 2, StepName: "step0", Claims: window})
		require.NoError(t, err)
		// Each element's first attempt failed transiently: handed back.
		for _, e := range els {
			r, err := s.Rescue(ctx, sas.RescueParams{Key: e, From: sas.Processing, Attempt: 1, Now: at(2 * time.Second), PickupBy: at(time.Minute),
				Actor: "a", Reason: "attempt 1 failed: timeout", Holder: "a"})
			require.NoError(t, err)
			require.Equal(t, sas.Pending, r.ProcessState)
		}
		return k, els
	}
	next := func(e sas.StepKey) (sas.StepRecord, error) {
		return s.Claim(ctx, sas.ClaimParams{Key: e, Attempt: 1, Owner: "b", Now: at(3 * time.Second), CompleteBy: at(2 * time.Minute)})
	}
	refused := func(e, step sas.StepKey, state sas.ProcessState, why string) {
		t.Helper()
		_, err := next(e)
		require.ErrorIs(t, err, sas.ErrLostRace, why)
		var re *sas.RaceError
		require.ErrorAs(t, err, &re)
		require.Equal(t, step, re.Key, "lost to the fan-out step")
		require.NotNil(t, re.Current)
		require.Equal(t, state, re.Current.ProcessState)
		r, err := s.GetStep(ctx, e)
		require.NoError(t, err)
		require.Equal(t, sas.Pending, r.ProcessState, "nothing of the refused claim is made")
		require.Equal(t, 1, r.Attempt)
		require.Empty(t, r.LockedBy)
	}

	k, els := start("o-fenced")
	got, err := next(els[0])
	require.NoError(t, err, "a running fan-out's element takes its next attempt")
	require.Equal(t, sas.Processing, got.ProcessState)
	require.Equal(t, 2, got.Attempt)
	_, err = s.Fail(ctx, sas.FailParams{Key: k, Owner: "a", Attempt: 1, Now: at(4 * time.Second), Reason: "element 0 failed", Effect: true})
	require.NoError(t, err)
	refused(els[1], k, sas.Error, "no element starts after its fan-out stopped")
	// The undo of an element is claimed from Error once its fan-out is
	// being undone: not fenced on the step running.
	away, err := s.Cancel(ctx, sas.CancelParams{Key: els[1], From: sas.Pending, Attempt: 1, Now: at(5 * time.Second), Actor: "a", Reason: "its fan-out stopped"})
	require.NoError(t, err)
	_, err = s.Claim(ctx, sas.ClaimParams{Key: k, From: sas.Error, Attempt: 1, Owner: "a", Now: at(6 * time.Second), CompleteBy: at(time.Minute)})
	require.NoError(t, err)
	undo, err := s.Claim(ctx, sas.ClaimParams{Key: els[1], From: sas.Error, Attempt: away.Attempt, Owner: "a", Now: at(6 * time.Second), CompleteBy: at(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, sas.Compensating, undo.ProcessState)

	k, els = start("o-marked")
	_, err = s.Cancel(ctx, sas.CancelParams{Key: k, From: sas.Processing, Attempt: 1, Now: at(4 * time.Second), Actor: "op", Reason: "cancel"})
	require.NoError(t, err)
	refused(els[0], k, sas.Processing, "no element starts after its order was cancelled")
}

// testFanOutOfAMarkedStepDoesNotStart: a claimed fan-out step that its
// order's cancel marked before its start starts no element: StartFanOut
// loses the race to the mark, and nothing of it is written.
func testFanOutOfAMarkedStepDoesNotStart(t *testing.T, h Harness) {
	s := h.New(t).Store
	fs, ok := s.(sas.FanOutStore)
	if !ok {
		t.Skipf("%T keeps no fan-out elements", s)
	}
	submit(t, s, "o-markedfan", 1)
	k := key("o-markedfan", 0)
	claim(t, s, k, 0, "a", T0, at(time.Minute))
	_, err := s.Cancel(ctx, sas.CancelParams{Key: k, From: sas.Processing, Attempt: 1, Now: at(time.Second), Actor: "op", Reason: "cancel"})
	require.NoError(t, err)
	_, err = fs.StartFanOut(ctx, sas.StartFanOutParams{Key: k, Owner: "a", Attempt: 1, Now: at(2 * time.Second), Count: 2, StepName: "step0",
		Claims: []sas.ElementClaim{{Index: 0, Item: json.RawMessage(`0`), CompleteBy: at(time.Minute)}, {Index: 1, Item: json.RawMessage(`1`), CompleteBy: at(time.Minute)}}})
	require.ErrorIs(t, err, sas.ErrLostRace, "a marked step starts no element")
	st, err := s.GetStep(ctx, k)
	require.NoError(t, err)
	require.Zero(t, st.ForEachCount)
	page, err := fs.ListElements(ctx, sas.ListElementsParams{Key: k})
	require.NoError(t, err)
	require.Empty(t, page.Records)
}
