package localrun_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/emulator"
	"github.com/sas-go/sas/internal/localrun"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/remotesim"
	"github.com/sas-go/sas/internal/sas"
)

// TestOverloadFailsNothingAndSendsEachRequestOnce: a burst of orders into
// a system whose agents need many step timeouts to drain it, with no fault
// injected. Requests wait in the agent queue far past their deadlines; none
// may fail for it (docs/protocol.md, "Waiting is not executing"), and the
// rescue path must not amplify the backlog: the bound on requests per order
// under overload without faults is one agent request per step, so the remote
// sees exactly one call per step and the supervisor rescues nothing.
//
// The numbers fix how deep the overload is, not how fast anything runs: one
// agent instance runs 10 calls at a time, each takes 300 ms, so 400 orders
// of 1 or 3 steps are ~800 calls ≈ 24 s of agent work against a 2 s step
// timeout: the last requests wait about ten timeouts. A slower machine only
// deepens the overload.
func TestOverloadFailsNothingAndSendsEachRequestOnce(t *testing.T) {
	emulator.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sys, err := localrun.Start(ctx, localrun.Options{
		// A pick-up allowance far shorter than the backlog's drain: most
		// requests are picked up late and reported (issue 31).
		Instances: 1, StepTimeout: 2 * time.Second, AttemptTimeout: 2 * time.Second, PickupTimeout: 2 * time.Second,
		Faults: remotesim.Faults{Profile: remotesim.Profile{LatencyBase: 300 * time.Millisecond}},
	})
	require.NoError(t, err)
	defer sys.Close()
	defer runInBackground(ctx, sys)()

	const orders = 400
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
	views, err := sys.WaitSettled(ctx, ids, time.Second, nil)
	require.NoError(t, err, "the burst did not settle")

	v := localrun.Judge(sys.Evidence(ids, views), localrun.JudgeRules{})
	require.Empty(t, v.Problems(), "verdict")
	require.Equal(t, orders, v.Processed, "no fault was injected: every order is Processed")
	require.Zero(t, v.FailedByWaiting)

	rescued, gaveUp, _ := sys.Totals()
	require.Zero(t, rescued, "waiting is not a failure: nothing to rescue")
	require.Zero(t, gaveUp)
	waited := 0
	for _, r := range sys.Reports() {
		waited += r.Waited
	}
	require.Positive(t, waited, "the overload was deep enough that deadlines passed in the queue")

	calls := map[string]int{}
	all, dropped := sys.Sim.Calls()
	require.Zero(t, dropped)
	for _, c := range all {
		calls[c.OrderID]++
	}
	for _, id := range ids {
		require.Equal(t, steps[id], calls[id], "order %s: one call per step, no second request for a waiting step", id)
	}
	t.Logf("%d orders (%d calls), %d waits, 0 rescues", orders, len(all), waited)
}
