package supervisor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// A deploy that tightens a step's limits does not touch orders in flight:
// a due step is judged on the definition its order runs on, read by the
// order's version (docs/workflows.md, "Versions").
func TestLimitsComeFromTheOrdersOwnVersion(t *testing.T) {
	t.Parallel()
	step := func(failures int, total time.Duration) sas.StepDef {
		return sas.StepDef{Name: "step0", Agent: "a", Action: "do", Timeout: stepTimeout, MaxFailures: failures, TotalLimit: total}
	}
	v1 := sas.Workflow{Name: "test", Steps: []sas.StepDef{step(5, 0), {Name: "step1", Agent: "a", Action: "do", Timeout: stepTimeout}}}
	v2 := sas.Workflow{Name: "test", Steps: []sas.StepDef{step(1, time.Minute), {Name: "step1", Agent: "a", Action: "do", Timeout: stepTimeout}}}
	require.NotEqual(t, v1.Version(), v2.Version())

	e := newEnv(t)
	require.NoError(t, e.mem.PutDefinition(t.Context(), v1))
	// The order was submitted on v1; v2 is what is deployed now.
	o := testOrder("o-v1", 2)
	o.Version = v1.Version()
	now := e.clock.Now()
	_, err := e.mem.Submit(t.Context(), sas.SubmitParams{Order: o, Now: now, PickupBy: now.Add(time.Minute),
		Claim: &sas.ClaimParams{Owner: "sched-1", CompleteBy: now.Add(stepTimeout)}})
	require.NoError(t, err)
	e.start(t, key("o-v1", 0), sas.Processing, "sched-1", 1)
	// And one submitted on v2, beside it.
	e.submitClaimed(t, "o-v2", 2)
	// (testOrder has no version: an order from before versions runs on the registered definition.)

	reg, err := sas.NewRegistry(v2)
	require.NoError(t, err)
	deployed, err := reg.Limits()
	require.NoError(t, err)
	s := e.supervisor(t, func(c *Config) { c.Workflows, c.Steps = reg, deployed })

	// Two hours on: past v2's total limit, and one failure, v2's threshold.
	e.clock.Set(T0.Add(2 * time.Hour))
	rep := runOnce(t, s)
	require.Equal(t, 1, rep.Rescued, "the v1 order is rescued on v1's limits (failure 1 of 5)")
	require.Equal(t, 1, rep.GaveUp, "the v2 order is given up on v2's")

	r := e.step(t, "o-v1", 0)
	require.Equal(t, sas.Pending, r.ProcessState)
	require.Contains(t, r.LastError, "failure 1 of 5")
	r = e.step(t, "o-v2", 0)
	require.Equal(t, sas.Error, r.ProcessState)
	require.Contains(t, r.LastError, "overall limit of 1m0s")
	require.EqualValues(t, 2, e.store.getOrders.Load(), "one order read per order with a due step")

	// With the order's definition not to be found (never stored), the
	// deployed limits by step name apply, and the sweep says why.
	e.submitClaimed(t, "o-x", 2)
	x := testOrder("o-lost", 2)
	x.Version = "0123456789abcdef"
	_, err = e.mem.Submit(t.Context(), sas.SubmitParams{Order: x, Now: e.clock.Now(), PickupBy: e.clock.Now().Add(time.Minute),
		Claim: &sas.ClaimParams{Owner: "sched-1", CompleteBy: e.clock.Now().Add(stepTimeout)}})
	require.NoError(t, err)
	e.clock.Advance(time.Hour)
	runOnce(t, s)
	require.Equal(t, sas.Error, e.step(t, "o-lost", 0).ProcessState, "v2's threshold of 1, by step name")
	require.Contains(t, e.logs.String(), "finding the definition the order runs on; using the deployed limits")
}
