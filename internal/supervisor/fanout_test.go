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
