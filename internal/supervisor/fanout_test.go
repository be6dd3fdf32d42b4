package supervisor

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// A fan-out's elements carry its deadlines (docs/decisions.md, "Fan-out
// elements are records of their own"): an element held past its deadline
// is rescued as a step is, its retry naming the element, and at its last
// chance given up, its alert and compensate naming the element. The
// running fan-out step itself is never due.
func TestAnElementPastItsDeadlineIsRescuedThenGivenUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.supervisor(t)
	const id = "o-fan"
	e.submitClaimed(t, id, 2)
	now := e.clock.Now()
	_, err := e.mem.Complete(t.Context(), sas.CompleteParams{Key: key(id, 0), Owner: "sched-1", Attempt: 1, Now: now,
		Next: &sas.ClaimParams{Key: key(id, 1), From: sas.Pending, Owner: "sched-1", Now: now, CompleteBy: now.Add(stepTimeout)}})
	require.NoError(t, err)
	_, err = e.mem.StartFanOut(t.Context(), sas.StartFanOutParams{Key: key(id, 1), Owner: "sched-1", Attempt: 1, Now: now, Count: 3,
		StepName: "step1", Claims: []sas.ElementClaim{
			{Index: 0, Item: json.RawMessage(`"a"`), CompleteBy: now.Add(stepTimeout)},
			{Index: 1, Item: json.RawMessage(`"b"`), CompleteBy: now.Add(stepTimeout)},
		}})
	require.NoError(t, err)
	el := key(id, sas.ElementStep(1, 1))
	e.start(t, key(id, sas.ElementStep(1, 0)), sas.Processing, "sched-1", 1)
	e.start(t, el, sas.Processing, "sched-1", 1)
	// Element 0 completes; element 1 is lost.
	_, err = e.mem.CompleteElement(t.Context(), sas.CompleteElementParams{Key: key(id, sas.ElementStep(1, 0)), Owner: "sched-1", Attempt: 1, Now: now,
		StepName: "step1", Next: &sas.ElementClaim{Index: 2, Item: json.RawMessage(`"c"`), CompleteBy: now.Add(time.Hour)}})
	require.NoError(t, err)

	var gaveUp *sas.Compensate
	for round := 0; round < 20 && gaveUp == nil; round++ {
		e.clock.Advance(stepTimeout + time.Minute)
		runOnce(t, s)
		for _, m := range e.queue.take(t) {
			switch m.Kind {
			case sas.KindRetry:
				require.Equal(t, el.Step, m.Retry.Step, "only element 1 is due: not its fan-out, not element 2 (its lease runs)")
				e.claim(t, el, sas.Pending, m.Retry.Attempt)
			case sas.KindCompensate:
				c := m.Compensate
				gaveUp = &c
			}
		}
		require.Equal(t, sas.Processing, e.step(t, id, 1).ProcessState, "the fan-out step is never rescued itself")
	}
	require.NotNil(t, gaveUp, "element 1 was given up")
	require.NotNil(t, gaveUp.GivenUp)
	require.Equal(t, el.Step, gaveUp.GivenUp.Step, "the compensate names the element")
	r, err := e.mem.GetStep(t.Context(), el)
	require.NoError(t, err)
	require.Equal(t, sas.Error, r.ProcessState)
	require.Greater(t, r.Attempt, 1, "it was rescued before it was given up")
	al := e.alerts.Alerts()
	require.NotEmpty(t, al)
	require.Equal(t, el.Step, al[len(al)-1].Step, "the alert names the element")
}

// A fan-out's undo undoes its elements one at a time, each held to its own
// deadline, so the step's own undo claim outlives its deadline while the
// chain runs (a thousand elements take a thousand undos). While an element
// is held, the step's undo is waited on, not rescued: no failure counted,
// no retry sent, never given up. Once nothing holds it, it is re-driven
// at its deadline, not at the delivery horizon, with no failure counted.
func TestAFanOutsUndoIsNotRescuedWhileAnElementsUndoRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.supervisor(t, func(c *Config) {
		c.Steps = map[string]sas.StepLimits{"step0": {Timeout: stepTimeout, FanOut: true}}
	})
	const id = "o-fan-undo"
	e.submitClaimed(t, id, 1)
	ctx, now := t.Context(), e.clock.Now()
	_, err := e.mem.StartFanOut(ctx, sas.StartFanOutParams{Key: key(id, 0), Owner: "sched-1", Attempt: 1, Now: now, Count: 3,
		StepName: "step0", Claims: []sas.ElementClaim{
			{Index: 0, Item: json.RawMessage(`"a"`), CompleteBy: now.Add(stepTimeout)},
			{Index: 1, Item: json.RawMessage(`"b"`), CompleteBy: now.Add(stepTimeout)},
			{Index: 2, Item: json.RawMessage(`"c"`), CompleteBy: now.Add(stepTimeout)},
		}})
	require.NoError(t, err)
	for i := range 3 {
		_, err = e.mem.CompleteElement(ctx, sas.CompleteElementParams{Key: key(id, sas.ElementStep(0, i)), Owner: "sched-1", Attempt: 1, Now: now, StepName: "step0"})
		require.NoError(t, err)
	}
	_, err = e.mem.Complete(ctx, sas.CompleteParams{Key: key(id, 0), Owner: "sched-1", Attempt: 1, Now: now})
	require.NoError(t, err)
	// The order is compensated: the step's undo is claimed, then the
	// undo of its last element, held for an hour.
	undo, err := e.mem.Claim(ctx, sas.ClaimParams{Key: key(id, 0), From: sas.Processed, Attempt: 1, Owner: "sched-2", Now: now, CompleteBy: now.Add(stepTimeout)})
	require.NoError(t, err)
	require.Equal(t, sas.Compensating, undo.ProcessState)
	el := key(id, sas.ElementStep(0, 2))
	_, err = e.mem.Claim(ctx, sas.ClaimParams{Key: el, From: sas.Processed, Attempt: 1, Owner: "sched-2", Now: now, CompleteBy: now.Add(time.Hour)})
	require.NoError(t, err)
	_, err = e.mem.Start(ctx, sas.StartParams{Key: el, From: sas.Compensating, Owner: "sched-2", Attempt: 2, Now: now, CompleteBy: now.Add(time.Hour)})
	require.NoError(t, err)

	for range 5 { // past every retry the undo's policy allows
		e.clock.Advance(stepTimeout + time.Minute)
		runOnce(t, s)
		require.Empty(t, e.queue.take(t), "nothing is re-driven while element 2's undo runs")
		r := e.step(t, id, 0)
		require.Equal(t, sas.Compensating, r.ProcessState)
		require.Equal(t, undo.Attempt, r.Attempt, "the step's undo is not rescued")
		require.Zero(t, r.FailureCount, "waiting on its elements is no failure")
		require.True(t, r.DueAt.After(e.clock.Now()), "its deadline moved on")
	}

	// Element 2 undone, and the handler that would claim element 1's undo
	// died: nothing holds the step's undo, which is re-driven at its
	// deadline (its dispatch claims the next element's undo).
	_, err = e.mem.Complete(ctx, sas.CompleteParams{Key: el, Owner: "sched-2", Attempt: 2, Now: e.clock.Now(), Compensation: true})
	require.NoError(t, err)
	e.clock.Advance(time.Hour)
	runOnce(t, s)
	var retried bool
	for _, m := range e.queue.take(t) {
		retried = retried || (m.Kind == sas.KindRetry && m.Retry.Step == 0)
	}
	require.True(t, retried, "the step's undo, held by no element, is rescued")
	r := e.step(t, id, 0)
	require.Empty(t, r.LockedBy, "handed back for a scheduler to claim again")
	require.Zero(t, r.FailureCount, "as a lost request's re-drive: nothing of the step's own undo ran that could fail")
}
