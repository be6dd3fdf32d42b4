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
// The numbers fix how deep the overload is, not how fast anything runs, and
// the depth comes from the remote's latency, which a busy machine does not
// shorten, rather than from the number of orders, which costs the emulators
// (400 orders of 300 ms calls took 33 s on a quiet machine, 111-188 s at a
// load average of 25-30, and once ran out of its 5 minutes there): one agent
// instance runs 10 calls at a time, each takes 1 s, so 120 orders of 1 or 3
// steps are 240 calls, at least 24 s of agent work, against a deadline of a
// claim's 5 s pick-up allowance plus a 6 s step timeout: half the requests
// at least wait past their deadlines, and a slower machine only deepens the
// overload. The allowances leave a busy machine room (a scheduler 5 s late
// to claim, a 1 s call stretched by 5 s) where the 2 s of each it had did
// not; a call stretched further still is counted against its attempts, not
// failed.
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
	views, err := sys.WaitSettled(ctx, ids, time.Second, nil)
	require.NoError(t, err, "the burst did not settle")

	v := judge.Judge(sys.Evidence(ids, views), judge.JudgeRules{})
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
