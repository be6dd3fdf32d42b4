package suites_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/dev/localrun"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/emulator"
)

// TestAPauseLongerThanTheWaitLimit: an operator pauses the agent while
// orders are in flight (docs/console.md, "Pausing an agent"); the pause
// outlasts the steps' timeout and wait limit, and the supervisor, which
// keeps sweeping, holds them; nothing is rescued or given up. After the
// resume every order is Processed, each step with one effect.
func TestAPauseLongerThanTheWaitLimit(t *testing.T) {
	emulator.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const (
		stepTimeout = 2 * time.Second
		waitLimit   = 3 * time.Second
	)
	sys, err := localrun.Start(ctx, localrun.Options{StepTimeout: stepTimeout, WaitLimit: waitLimit, MaxFailures: 1,
		PickupTimeout: 2 * time.Second, SupervisorEvery: 500 * time.Millisecond, Instances: 1})
	require.NoError(t, err)
	defer sys.Close()

	pausedAt := time.Now().UTC()
	_, err = sys.Store.PauseAgent(ctx, sas.PauseParams{Agent: registry.PaymentsAgent, Now: pausedAt, Actor: "operator:test"})
	require.NoError(t, err)
	// Paused before the pollers start: no receive is in progress when the
	// pause takes hold (a batch already in hand would be finished, as a
	// disabled event source mapping finishes its invocations).
	defer runInBackground(ctx, sys)()
	var ids []string
	var intakes []sas.Intake
	for i := range 8 {
		wf := registry.Payment
		if i%2 == 1 {
			wf = registry.Order
		}
		id := fmt.Sprintf("paused-%d", i)
		ids = append(ids, id)
		intakes = append(intakes, sas.Intake{V: sas.MessageVersion, OrderID: id, Workflow: wf, Payload: []byte(`{"amount":10}`)})
	}
	require.NoError(t, sys.Submit(ctx, intakes...))

	// Hold the pause until a sweep that started past every first deadline
	// and its wait limit (and then some) held the orders' steps.
	limit := pausedAt.Add(2 * (stepTimeout + waitLimit + sys.Opts.PickupTimeout))
	for {
		held := false
		for _, rep := range sys.Reports() {
			if rep.Started.After(limit) && rep.Held >= len(ids) {
				held = true
			}
		}
		if held {
			break
		}
		if ctx.Err() != nil {
			reps := sys.Reports()
			t.Fatalf("no sweep held the paused steps past their limits; last report: %+v", reps[len(reps)-1])
		}
		time.Sleep(200 * time.Millisecond)
	}
	rescued, gaveUp, _ := sys.Totals()
	require.Zero(t, rescued+gaveUp, "nothing rescued or given up while paused")
	require.Zero(t, len(sys.Sim.Effects()), "no request consumed while paused")
	for _, id := range ids {
		v, err := sys.Store.GetOrder(ctx, id)
		require.NoError(t, err)
		require.Equal(t, sas.Processing, v.State(), "order %s waits", id)
		require.Zero(t, v.Steps[0].FailureCount)
	}

	_, err = sys.Store.ResumeAgent(ctx, sas.PauseParams{Agent: registry.PaymentsAgent, Now: time.Now().UTC(), Actor: "operator:test"})
	require.NoError(t, err)
	views, err := sys.WaitTerminal(ctx, ids, 200*time.Millisecond)
	require.NoError(t, err)
	for _, id := range ids {
		require.Equal(t, sas.Processed, views[id].State(), "order %s: %+v", id, views[id].Steps)
		for _, st := range views[id].Steps {
			require.Equal(t, 1, sys.Sim.EffectCount(sas.IdempotencyKey(id, st.Step, st.Generation, false)), "order %s step %d: one effect", id, st.Step)
		}
	}
	require.Empty(t, sys.Sim.Duplicates())
	_, gaveUp, _ = sys.Totals()
	require.Zero(t, gaveUp)
}
