package suites_test

import (
	"github.com/sas-go/sas/internal/dev/judge"

	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/dev/localrun"
	"github.com/sas-go/sas/internal/dev/remotesim"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/emulator"
)

// TestOverloadFailsNothingAndSendsEachRequestOnce: a burst of orders into
// a system whose agents need many step timeouts to drain it, with no fault
// injected. Requests wait in the agent queue far past their deadlines; none
// may fail for it (docs/protocol.md, "Waiting is not executing"), and the
// rescue path must not amplify the backlog: the supervisor rescues nothing,
// the remote sees one call per attempt, and a step gets a second attempt
// only after a call that ran (a call that a busy machine stretches past its
// step timeout is retried, correctly), never because its request waited. On
// an idle machine that is one call per step.
//
// The depth of the overload is made, not hoped for: the agents are held
// (localrun.System.HoldAgents, a saturated agent) until every order's first
// request is queued and a supervisor has found one past its deadline and
// waited on it, so a slow scheduler, which a busy machine makes the
// bottleneck, cannot drain the burst as it comes. Then one agent instance,
// 10 calls at a time of 1 s each, drains 120 orders of 1 or 3 steps: 240
// calls, at least 24 s of agent work, against a claim's 5 s pick-up
// allowance plus a 6 s step timeout. The allowances leave a busy machine
// room (a scheduler 5 s late to claim, a 1 s call stretched by 5 s); a call
// stretched further still is counted against its attempts, not failed.
func TestOverloadFailsNothingAndSendsEachRequestOnce(t *testing.T) {
	emulator.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a bound, not a timing
	defer cancel()
	sys, err := localrun.Start(ctx, localrun.Options{
		// A deadline far shorter than the backlog's drain: most requests
		// are picked up late and reported (issue 31).
		Instances: 1, StepTimeout: 6 * time.Second, AttemptTimeout: 6 * time.Second, PickupTimeout: 5 * time.Second,
		Faults: remotesim.Faults{Profile: remotesim.Profile{LatencyBase: time.Second}},
	})
	require.NoError(t, err)
	defer sys.Close()
	sys.HoldAgents(true)
	defer runInBackground(ctx, sys)()

	const orders = 120
	ids := make([]string, orders)
	steps := map[string]int{}
	var batch []sas.Intake
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-burst-%03d", sys.Opts.Name, i)
		wf := registry.Payment
		if i%2 == 1 {
			wf = registry.Order
		}
		steps[ids[i]] = len(sys.Registry[wf].Steps)
		batch = append(batch, sas.Intake{OrderID: ids[i], Workflow: wf, Payload: []byte(`{"amount":10}`)})
	}
	require.NoError(t, sys.Submit(ctx, batch...)) // in batches of ten
	waitedWhileHeld := awaitQueuedAndWaited(ctx, t, sys, ids)
	sys.HoldAgents(false)
	views, err := sys.WaitSettled(ctx, ids, time.Second, nil)
	require.NoError(t, err, "the burst did not settle")

	v := judge.Judge(sys.Evidence(ids, views), judge.JudgeRules{})
	require.Empty(t, v.Problems(), "verdict")
	require.Equal(t, orders, v.Processed, "no fault was injected: every order is Processed")
	require.Zero(t, v.FailedByWaiting)

	rescued, gaveUp, _ := sys.Totals()
	require.Zero(t, rescued, "waiting is not a failure: nothing to rescue")
	require.Zero(t, gaveUp)
	waited := totalWaited(sys)
	require.GreaterOrEqual(t, waited, waitedWhileHeld)

	calls := map[string]int{}
	all, dropped := sys.Sim.Calls()
	require.Zero(t, dropped)
	for _, c := range all {
		calls[c.OrderID]++
	}
	retried := 0
	for _, id := range ids {
		attempts := 0
		for _, st := range views[id].Steps {
			attempts += st.Attempt
		}
		require.Equal(t, attempts, calls[id], "order %s: one call per attempt, no second request for a waiting step", id)
		retried += attempts - steps[id]
		for _, h := range views[id].History {
			if h.From != sas.Processing || h.To == sas.Processed || h.To == sas.Processing {
				continue // not an attempt's end (Processing→Processing is a supervisor's wait)
			}
			_, ran := h.Run.Ran.Milliseconds()
			require.True(t, ran, "order %s step %d: attempt %d ended (%s: %s) without a run of its call", id, h.Step, h.Attempt, h.To, h.Reason)
		}
	}
	t.Logf("%d orders (%d calls, %d steps retried after a call that ran out), %d waits, 0 rescues", orders, len(all), retried, waited)
}

// awaitQueuedAndWaited returns, while the agents are held, once every
// order's first step is claimed (its request queued) and the supervisors
// have waited on at least one step past its deadline, with how many waits
// they had made. It fails the test if ctx ends first: the supervisor never
// found a request that waited past its deadline, or the scheduler never
// dispatched the burst.
func awaitQueuedAndWaited(ctx context.Context, t *testing.T, sys *localrun.System, ids []string) int {
	t.Helper()
	for {
		views, err := sys.Views(ctx, ids)
		require.NoError(t, err)
		queued := 0
		for _, id := range ids {
			if st := views[id].Steps; len(st) > 0 && st[0].ProcessState == sas.Processing {
				queued++
			}
		}
		waited := totalWaited(sys)
		if queued == len(ids) && waited > 0 {
			return waited
		}
		select {
		case <-ctx.Done():
			t.Fatalf("agents held: %d of %d first requests queued, %d waits: the overload never formed", queued, len(ids), waited)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// totalWaited is how many held steps past their deadline the supervisors
// have waited on so far.
func totalWaited(sys *localrun.System) int {
	n := 0
	for _, r := range sys.Reports() {
		n += r.Waited
	}
	return n
}
