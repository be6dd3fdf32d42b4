package localrun_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/emulator"
	"github.com/sas-go/sas/internal/localrun"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/remotesim"
	"github.com/sas-go/sas/internal/sas"
)

// TestPriorityLaneFinishesHighPriorityFirst: a backlog of ordinary orders
// in the agent's queue, then a few orders of sas.HighPriority. The agent has
// a priority lane (docs/agents.md, "Priority lanes"): the high-priority
// requests go to their own queue, polled with its own concurrency, so they
// do not wait behind the backlog.
//
// The numbers fix how deep the backlog is, not how fast anything runs: the
// agent's queue is served 10 calls at a time, each call takes 300 ms, so
// 300 orders are ~9 s of agent work; the 20 high-priority orders arrive
// behind them. Each order's time to its final state is counted from its
// submission to the store (so time spent in the shared intake queue is not
// counted): every high-priority order must finish faster than half of the
// ordinary ones. A slower machine deepens the backlog, so the margin grows.
func TestPriorityLaneFinishesHighPriorityFirst(t *testing.T) {
	emulator.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sys, err := localrun.Start(ctx, localrun.Options{
		Instances: 1, AgentWorkers: 1, PriorityWorkers: 1,
		StepTimeout: 2 * time.Second, AttemptTimeout: 2 * time.Second, PickupTimeout: 30 * time.Second,
		WaitLimit: 4 * time.Minute,
		Faults:    remotesim.Faults{Profile: remotesim.Profile{LatencyBase: 300 * time.Millisecond}},
	})
	require.NoError(t, err)
	defer sys.Close()
	defer runInBackground(ctx, sys)()

	const low, high = 300, 20
	var ids, highIDs []string
	var batch []sas.Intake
	for i := 0; i < low+high; i++ {
		in := sas.Intake{OrderID: fmt.Sprintf("%s-low-%03d", sys.Opts.Name, i), Workflow: registry.Payment, Payload: []byte(`{"amount":10}`)}
		if i >= low {
			in.OrderID, in.Priority = fmt.Sprintf("%s-high-%03d", sys.Opts.Name, i), 9
			highIDs = append(highIDs, in.OrderID)
		}
		ids = append(ids, in.OrderID)
		batch = append(batch, in)
	}
	require.NoError(t, sys.Submit(ctx, batch...)) // in batches of ten
	views, err := sys.WaitSettled(ctx, ids, time.Second, nil)
	require.NoError(t, err, "the orders did not settle")
	v := localrun.Judge(sys.Evidence(ids, views), localrun.JudgeRules{})
	require.Empty(t, v.Problems(), "verdict")
	require.Equal(t, low+high, v.Processed, "no fault was injected: every order is Processed")

	// Time to the final state, from the order's submission.
	took := func(id string) time.Duration {
		view := views[id]
		last := view.History[len(view.History)-1]
		require.Equal(t, sas.Processed, last.To, "order %s", id)
		return last.At.Sub(view.Order.CreatedAt)
	}
	var lows, highs []time.Duration
	for _, id := range ids {
		if slices.Contains(highIDs, id) {
			highs = append(highs, took(id))
		} else {
			lows = append(lows, took(id))
		}
	}
	slices.Sort(lows)
	slices.Sort(highs)
	medianLow, slowestHigh := lows[len(lows)/2], highs[len(highs)-1]
	t.Logf("time to Processed: ordinary p50 %s, p100 %s; high priority p50 %s, p100 %s",
		medianLow, lows[len(lows)-1], highs[len(highs)/2], slowestHigh)
	require.Less(t, slowestHigh, medianLow, "every high-priority order finishes faster than half of the ordinary ones")

}
