package suites_test

import (
	"github.com/sas-go/sas/internal/dev/judge"

	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/dev/localrun"
	"github.com/sas-go/sas/internal/dev/remotesim"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/emulator"
)

// orderV2 is the reference order after a deploy changed it: an insurance
// step comes before shipping, and shipping is another call. (The last step
// changes, so that orders running at the deploy still have it ahead.)
func orderV2(timeout time.Duration) sas.Workflow {
	return sas.Workflow{Name: registry.Order, Steps: []sas.StepDef{
		{Name: "reserve", Agent: registry.PaymentsAgent, Action: "POST /reservations", Undo: "POST /reservations/cancel", Timeout: timeout},
		{Name: "charge", Agent: registry.PaymentsAgent, Action: "POST /payments", Undo: "POST /refunds", Timeout: timeout},
		{Name: "insure", Agent: registry.PaymentsAgent, Action: "POST /insurance", Undo: "POST /insurance/cancel", Timeout: timeout},
		{Name: "ship", Agent: registry.PaymentsAgent, Action: "POST /deliveries", Timeout: timeout},
	}}
}

// TestADeployUnderRunningOrdersKeepsTheirVersion changes a workflow while
// orders of it run (System.Deploy replaces every scheduler and agent, as a
// deploy does): every order submitted before finishes on the definition it
// was submitted with (its steps, and the calls the remote saw), every order
// submitted after runs the new one, and the judge finds nothing wrong.
func TestADeployUnderRunningOrdersKeepsTheirVersion(t *testing.T) {
	emulator.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sys, err := localrun.Start(ctx, localrun.Options{
		Instances: 2, StepTimeout: 5 * time.Second,
		// Slow enough calls that the first orders are still running when
		// the deploy lands.
		Faults: remotesim.Faults{Profile: remotesim.Profile{LatencyBase: 100 * time.Millisecond}},
	})
	require.NoError(t, err)
	defer sys.Close()
	defer runInBackground(ctx, sys)()

	v1 := sys.Registry[registry.Order]
	v2 := orderV2(sys.Config.StepTimeout)
	submit := func(prefix string, n int) []string {
		var ids []string
		var batch []sas.Intake
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("%s-%s-%03d", sys.Opts.Name, prefix, i)
			ids = append(ids, id)
			batch = append(batch, sas.Intake{OrderID: id, Workflow: registry.Order, Payload: []byte(`{"amount":10}`)})
		}
		require.NoError(t, sys.Submit(ctx, batch...)) // in batches of ten
		return ids
	}
	before := submit("before", 60)

	// Deploy once the first order is done and others still run.
	require.Eventually(t, func() bool {
		for _, id := range before {
			if v, err := sys.Store.GetOrder(ctx, id); err == nil && v.State() == sas.Processed {
				return true
			}
		}
		return false
	}, 2*time.Minute, 50*time.Millisecond, "no order finished")
	reg, err := sas.NewRegistry(sys.Registry[registry.Payment], v2)
	require.NoError(t, err)
	deployedAt := time.Now()
	require.NoError(t, sys.Deploy(reg))
	after := submit("after", 60)

	ids := append(slices.Clone(before), after...)
	views, err := sys.WaitSettled(ctx, ids, time.Second, nil)
	require.NoError(t, err, "the orders did not settle")
	v := judge.Judge(sys.Evidence(ids, views), judge.JudgeRules{})
	require.Empty(t, v.Problems(), "verdict")
	require.Equal(t, len(ids), v.Processed, "no fault was injected: every order is Processed")

	paths := map[string][]string{}
	for _, e := range sys.Sim.Effects() {
		paths[e.OrderID] = append(paths[e.OrderID], e.Path)
	}
	wantPaths := func(w sas.Workflow) []string {
		var out []string
		for _, s := range w.Steps {
			out = append(out, s.Action[len("POST "):])
		}
		sort.Strings(out)
		return out
	}
	finishedAfterDeploy := 0
	for _, id := range before {
		view := views[id]
		require.Equal(t, v1.Version(), view.Order.Version, id)
		require.Equal(t, v1.StepNames(), view.Order.Steps, id)
		got := paths[id]
		sort.Strings(got)
		require.Equal(t, wantPaths(v1), got, "order %s ran on v1's calls", id)
		if view.History[len(view.History)-1].At.After(deployedAt) {
			finishedAfterDeploy++
		}
	}
	for _, id := range after {
		view := views[id]
		require.Equal(t, v2.Version(), view.Order.Version, id)
		require.Equal(t, v2.StepNames(), view.Order.Steps, id)
		got := paths[id]
		sort.Strings(got)
		require.Equal(t, wantPaths(v2), got, "order %s ran on v2's calls", id)
	}
	t.Logf("%d of %d orders submitted before the deploy finished after it", finishedAfterDeploy, len(before))
	require.Positive(t, finishedAfterDeploy, "the deploy landed under running orders")
}
