package supervisor

import (
	"context"
	"errors"
	"sync/atomic"
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
	// The order was submitted on v1; v2 is what is deployed now.
	submitOn(t, e, "o-v1", v1)
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

// unreadableDefinitions fails every definition read while down is set, as
// a throttled or unavailable store does.
type unreadableDefinitions struct {
	sas.StateStore
	down atomic.Bool
}

func (s *unreadableDefinitions) GetDefinition(ctx context.Context, name, version string) (sas.Workflow, error) {
	if s.down.Load() {
		return sas.Workflow{}, errors.New("ThrottlingException: rate exceeded")
	}
	return s.StateStore.GetDefinition(ctx, name, version)
}

// A due step whose order's definition cannot be read for now (a store
// error, not "not found") is left to a later sweep: the deployed limits,
// tighter than its own, would give it up early (simulator, issue 29: a
// store outage during a sweep gave up an order at failure 2 of 3).
func TestLimitsUnreadableForNowLeaveTheStepToALaterSweep(t *testing.T) {
	t.Parallel()
	v1 := sas.Workflow{Name: "test", Steps: []sas.StepDef{
		{Name: "step0", Agent: "a", Action: "do", Timeout: stepTimeout, MaxFailures: 5},
		{Name: "step1", Agent: "a", Action: "do", Timeout: stepTimeout}}}
	v2 := v1
	v2.Steps = []sas.StepDef{{Name: "step0", Agent: "a", Action: "do", Timeout: stepTimeout, MaxFailures: 1}, v1.Steps[1]}

	e := newEnv(t)
	submitOn(t, e, "o-v1", v1)
	reg, err := sas.NewRegistry(v2)
	require.NoError(t, err)
	deployed, err := reg.Limits()
	require.NoError(t, err)
	store := &unreadableDefinitions{StateStore: e.cfg.Store}
	store.down.Store(true)
	s := e.supervisor(t, func(c *Config) { c.Workflows, c.Steps, c.Store = reg, deployed, store })

	e.clock.Set(T0.Add(time.Hour))
	rep := runOnce(t, s)
	require.Zero(t, rep.GaveUp, "not given up on the deployed threshold of 1")
	require.Zero(t, rep.Rescued)
	require.Equal(t, sas.Processing, e.step(t, "o-v1", 0).ProcessState, "left as it was")
	require.Contains(t, e.logs.String(), "the step is left to a later sweep")

	store.down.Store(false)
	rep = runOnce(t, s)
	require.Equal(t, 1, rep.Rescued, "judged on its own limits once they can be read: failure 1 of 5")
	require.Contains(t, e.step(t, "o-v1", 0).LastError, "failure 1 of 5")
}

// submitOn stores wf and submits order id of two steps on it, its first
// step claimed and its pick-up reported (a started attempt, which the
// supervisor judges at its deadline).
func submitOn(t *testing.T, e *env, id string, wf sas.Workflow) {
	t.Helper()
	require.NoError(t, e.mem.PutDefinition(t.Context(), wf))
	o := testOrder(id, 2)
	o.Version = wf.Version()
	now := e.clock.Now()
	_, err := e.mem.Submit(t.Context(), sas.SubmitParams{Order: o, Now: now, PickupBy: now.Add(time.Minute),
		Claim: &sas.ClaimParams{Owner: "sched-1", CompleteBy: now.Add(stepTimeout)}})
	require.NoError(t, err)
	e.start(t, key(id, 0), sas.Processing, "sched-1", 1)
}
