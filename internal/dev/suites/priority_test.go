package suites_test

import (
	"github.com/sas-go/sas/internal/dev/judge"

	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/dev/localrun"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/emulator"
)

// TestPriorityLaneFinishesHighPriorityFirst: a backlog of ordinary orders
// in the agent's queue, then a few orders of sas.HighPriority. The agent has
// a priority lane (docs/agents.md, "Priority lanes"): the high-priority
// requests go to their own queue, polled with its own concurrency, so they
// do not wait behind the backlog.
//
// The backlog is held in place rather than raced: the remote service holds
// every ordinary order's call (remotesim's Hold) until the high-priority
// orders are all Processed, so the agent queue's one invocation is stuck on
// its batch and the rest of the backlog waits behind it. Only a lane can
// then serve the high-priority orders; without one they would wait behind
// the held batch, and the test fails (on its deadline) however fast or slow
// the machine. Timeouts are long enough that no held call is cut.
func TestPriorityLaneFinishesHighPriorityFirst(t *testing.T) {
	emulator.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const long = 4 * time.Minute
	sys, err := localrun.Start(ctx, localrun.Options{
		Instances: 1, AgentWorkers: 1, PriorityWorkers: 1,
		StepTimeout: long, AttemptTimeout: long, PickupTimeout: long, WaitLimit: long, Visibility: long,
	})
	require.NoError(t, err)
	defer sys.Close()
	defer runInBackground(ctx, sys)()

	const low, high = 15, 3
	release := sys.Sim.Hold(func(orderID string) bool { return strings.Contains(orderID, "-low-") })
	defer release()
	var lowIDs, highIDs []string
	var lows, highs []sas.Intake
	for i := range low + high {
		in := sas.Intake{OrderID: fmt.Sprintf("%s-low-%03d", sys.Opts.Name, i), Workflow: registry.Payment, Payload: []byte(`{"amount":10}`)}
		if i >= low {
			in.OrderID, in.Priority = fmt.Sprintf("%s-high-%03d", sys.Opts.Name, i), 9
			highIDs, highs = append(highIDs, in.OrderID), append(highs, in)
			continue
		}
		lowIDs, lows = append(lowIDs, in.OrderID), append(lows, in)
	}
	require.NoError(t, sys.Submit(ctx, lows...))
	// The agent queue's invocation has its batch in hand, held.
	for sys.Sim.Held() == 0 {
		require.NoError(t, ctx.Err(), "no ordinary call reached the remote service")
		time.Sleep(50 * time.Millisecond)
	}

	require.NoError(t, sys.Submit(ctx, highs...))
	waitCtx, waitCancel := context.WithTimeout(ctx, 2*time.Minute)
	defer waitCancel()
	for {
		views, err := sys.Views(waitCtx, highIDs)
		if waitCtx.Err() != nil {
			t.Fatalf("the high-priority orders did not pass the held backlog: %v", waitCtx.Err())
		}
		require.NoError(t, err)
		processed := 0
		for _, v := range views {
			if v.State() == sas.Processed {
				processed++
			}
		}
		if processed == high {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.Positive(t, sys.Sim.Held(), "the backlog was still held when the high-priority orders were done")
	for _, e := range sys.Sim.Effects() {
		require.NotContains(t, e.OrderID, "-low-", "an ordinary order ran before the release")
	}

	release()
	ids := append(lowIDs, highIDs...)
	views, err := sys.WaitSettled(ctx, ids, time.Second, nil)
	require.NoError(t, err, "the orders did not settle")
	v := judge.Judge(sys.Evidence(ids, views), judge.JudgeRules{})
	require.Empty(t, v.Problems(), "verdict")
	require.Equal(t, low+high, v.Processed, "no fault was injected: every order is Processed")
}
