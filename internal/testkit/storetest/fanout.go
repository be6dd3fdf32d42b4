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
