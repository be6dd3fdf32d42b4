package sasctl

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// runningOrder makes a two-step order whose first step is in flight.
func (f fixture) runningOrder(t *testing.T, id string) {
	t.Helper()
	_, err := f.store.Submit(context.Background(), sas.SubmitParams{Order: sas.Order{OrderID: id, Workflow: "order", Steps: []string{"reserve", "charge"}},
		Now: t0, PickupBy: t0.Add(time.Minute), Claim: &sas.ClaimParams{Owner: "s", CompleteBy: t0.Add(2 * time.Hour)}})
	require.NoError(t, err)
}

// compensate on an order with a step in flight says it is refused, and
// sends nothing, where it used to print "asked" while the scheduler
// dropped the request; cancel records the request (the fenced write) and
// says when it takes effect.
func TestCompensateInFlightIsRefusedAndCancelSaysWhatItDid(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.runningOrder(t, "o-run")
	err := f.app.Run(ctx, []string{"compensate", "o-run"})
	require.ErrorIs(t, err, ErrInFlight)
	require.Contains(t, f.out.String(), "REFUSED: compensate o-run: step 0 (reserve) is Processing and could still take effect")
	require.NotContains(t, f.out.String(), "asked the scheduler")
	require.Empty(t, f.receive(t, f.schq), "nothing is sent that would be dropped")

	f.out.Reset()
	require.NoError(t, f.app.Run(ctx, []string{"cancel", "o-run", "-dry-run"}))
	require.Contains(t, f.out.String(), "would cancel o-run: step 0 (reserve) is in flight (attempt 1)")
	r, err := f.store.GetStep(ctx, sas.StepKey{OrderID: "o-run"})
	require.NoError(t, err)
	require.False(t, r.Cancelled, "a dry run changes nothing")

	f.out.Reset()
	require.NoError(t, f.app.Run(ctx, []string{"cancel", "o-run", "-reason", "customer called"}))
	require.Contains(t, f.out.String(), "cancel recorded for o-run: step 0 (reserve) is in flight (attempt 1); it will take effect when that step settles")
	r, err = f.store.GetStep(ctx, sas.StepKey{OrderID: "o-run"})
	require.NoError(t, err)
	require.True(t, r.Cancelled)
	require.Equal(t, "cancel requested by operator:test: customer called", r.History[len(r.History)-1].Reason, "the actor in the history")
	bodies := f.receive(t, f.schq)
	require.Len(t, bodies, 1, "the scheduler is told too: a waiting callback step has no reply to find the mark with")
	require.JSONEq(t, `{"v":1,"kind":"cancel","orderId":"o-run","reason":"customer called","actor":"operator:test"}`, bodies[0])
}

// A step waiting to be claimed is turned away at once, and the scheduler
// told; a finished order is refused with its reason.
func TestCancelOfAReadyStepAndOfAFinishedOrder(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	_, err := f.store.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: "o-ready", Workflow: "payment", Steps: []string{"charge"}}, Now: t0, PickupBy: t0.Add(time.Minute)})
	require.NoError(t, err)
	require.NoError(t, f.app.Run(ctx, []string{"cancel", "o-ready"}))
	require.Contains(t, f.out.String(), "asked the scheduler to cancel o-ready: step 0 (charge) waits to be claimed; the scheduler turns it away when it reads the request")
	bodies := f.receive(t, f.schq)
	require.Len(t, bodies, 1)
	require.JSONEq(t, `{"v":1,"kind":"cancel","orderId":"o-ready","reason":"requested by operator","actor":"operator:test"}`, bodies[0])
	r, err := f.store.GetStep(ctx, sas.StepKey{OrderID: "o-ready"})
	require.NoError(t, err)
	require.False(t, r.Cancelled, "the scheduler makes the write, with the undos: a lost message leaves nothing half done")

	f.failedOrder(t, "o-failed")
	f.out.Reset()
	err = f.app.Run(ctx, []string{"cancel", "o-failed"})
	require.ErrorIs(t, err, sas.ErrNotRunning)
	require.Contains(t, f.out.String(), "REFUSED: cannot cancel order o-failed: a step failed and waits for an operator")
	require.ErrorIs(t, f.app.Run(ctx, []string{"cancel", "o-missing"}), sas.ErrNotFound)
}

// An order with two branches in flight: the dry run names both, and the
// cancel marks both (a fenced write each) and tells the scheduler.
func TestCancelMarksEveryBranchInFlight(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	o := sas.Order{OrderID: "o-br", Workflow: "trip", Steps: []string{"quote", "flight", "hotel", "pay"}, After: [][]int{{}, {0}, {0}, {1, 2}}}
	_, err := f.store.Submit(ctx, sas.SubmitParams{Order: o, Now: t0, PickupBy: t0.Add(time.Minute),
		Claim: &sas.ClaimParams{Owner: "s", CompleteBy: t0.Add(2 * time.Hour)}})
	require.NoError(t, err)
	claim := func(step int) sas.ClaimParams {
		return sas.ClaimParams{Key: sas.StepKey{OrderID: "o-br", Step: step}, Owner: "s", Now: t0, CompleteBy: t0.Add(2 * time.Hour)}
	}
	next := claim(1)
	_, err = f.store.Complete(ctx, sas.CompleteParams{Key: sas.StepKey{OrderID: "o-br"}, Owner: "s", Attempt: 1, Now: t0, Graph: true,
		Next: &next, More: []sas.ClaimParams{claim(2)}})
	require.NoError(t, err)

	require.NoError(t, f.app.Run(ctx, []string{"cancel", "o-br", "-dry-run"}))
	require.Contains(t, f.out.String(), "would cancel o-br: step 1 (flight) is in flight (attempt 1): the cancel would be recorded and take effect when that step settles; "+
		"step 2 (hotel) is in flight (attempt 1)")

	f.out.Reset()
	require.NoError(t, f.app.Run(ctx, []string{"cancel", "o-br"}))
	require.Contains(t, f.out.String(), "cancel recorded for o-br: steps 1 (flight), 2 (hotel) are in flight at once; it will take effect when they have settled")
	v, err := f.store.GetOrder(ctx, "o-br")
	require.NoError(t, err)
	for _, i := range []int{1, 2} {
		require.True(t, v.Steps[i].Cancelled, "step %d marked", i)
		require.Equal(t, sas.Processing, v.Steps[i].ProcessState)
	}
	require.False(t, v.Steps[3].Cancelled)
	require.Len(t, f.receive(t, f.schq), 1, "the scheduler is told")

	f.out.Reset()
	require.NoError(t, f.app.Run(ctx, []string{"cancel", "o-br"}))
	require.Contains(t, f.out.String(), "cancel recorded for o-br: step 1 (flight) is in flight (attempt 1)", "a repeat marks nothing again and says where the cancel stands")
}
