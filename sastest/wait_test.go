package sastest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/sastest"
	"github.com/sas-go/sas/workflow"
)

// reminder: an order is placed, 72 hours pass, a reminder goes out; the
// reminder step reads the kit's clock.
var reminder = []workflow.Workflow{{Name: "reminder", Steps: []workflow.Step{
	{Name: "place", Agent: "shop", Action: "place", Timeout: workflow.Duration(10 * time.Second)},
	{Name: "cool-off", Wait: &workflow.Wait{For: workflow.Duration(72 * time.Hour)}},
	{Name: "remind", Agent: "shop", Action: "remind", Timeout: workflow.Duration(10 * time.Second)},
}}}

func reminderEnv(t *testing.T) (*sastest.Env, *[]time.Time, *[]time.Time) {
	var placed, reminded []time.Time
	shop := agent.New("shop").
		Step("place", func(_ context.Context, req agent.Request) (any, error) {
			placed = append(placed, req.Now())
			return nil, nil
		}, ok).
		Step("remind", func(_ context.Context, req agent.Request) (any, error) {
			reminded = append(reminded, req.Now())
			return nil, nil
		}, ok)
	return sastest.New(t, reminder, shop), &placed, &reminded
}

// A 72-hour wait runs in milliseconds of the wall clock, ends no earlier
// than 72 hours of the kit's clock after it started, and the steps read
// that clock (agent.Request.Now).
func TestA72HourWaitRunsInMilliseconds(t *testing.T) {
	t.Parallel()
	env, placed, reminded := reminderEnv(t)
	start, wall := env.Now(), time.Now()
	res := env.Run("reminder", "r-1", nil)
	require.Equal(t, sastest.StatusProcessed, res.Status)
	require.Len(t, *placed, 1)
	require.Len(t, *reminded, 1)
	require.Equal(t, start, (*placed)[0], "a step reads the kit's clock")
	gap := (*reminded)[0].Sub((*placed)[0])
	require.GreaterOrEqual(t, gap, 72*time.Hour, "never early")
	require.Less(t, gap, 72*time.Hour+2*time.Minute, "within a sweep or two of its due time")
	require.Less(t, time.Since(wall), 10*time.Second, "three days of virtual time in well under the wall clock's seconds")
}

// An order submitted to start on Monday at 09:00 starts then, not before.
func TestAnOrderStartsAtItsTime(t *testing.T) {
	t.Parallel()
	env, placed, _ := reminderEnv(t)
	at := env.Now().Add(50 * time.Hour)
	res := env.RunAt(at, "reminder", "r-2", nil)
	require.Equal(t, sastest.StatusProcessed, res.Status)
	require.Len(t, *placed, 1)
	require.False(t, (*placed)[0].Before(at), "never before its start time")
	require.Less(t, (*placed)[0].Sub(at), 2*time.Minute)
}

// A 72-hour wait that is one of two branches: pack runs at once in the
// other branch, and ship, which follows both, waits for the wait.
func TestAWaitInABranchHoldsTheJoin(t *testing.T) {
	t.Parallel()
	step := func(name string, after ...string) workflow.Step {
		return workflow.Step{Name: name, Agent: "shop", Action: name, Timeout: workflow.Duration(10 * time.Second), After: after}
	}
	wf := []workflow.Workflow{{Name: "cooling", Steps: []workflow.Step{
		step("place"),
		{Name: "cool-off", Wait: &workflow.Wait{For: workflow.Duration(72 * time.Hour)}, After: []string{"place"}},
		step("pack", "place"),
		step("ship", "cool-off", "pack"),
	}}}
	at := map[string]time.Time{}
	record := func(_ context.Context, req agent.Request) (any, error) {
		at[req.Step] = req.Now()
		return nil, nil
	}
	shop := agent.New("shop").Step("place", record, ok).Step("pack", record, ok).Step("ship", record, ok)
	env := sastest.New(t, wf, shop)
	res := env.Run("cooling", "c-1", nil)
	require.Equal(t, sastest.StatusProcessed, res.Status)
	require.Less(t, at["pack"].Sub(at["place"]), time.Hour, "pack runs beside the wait, not after it")
	gap := at["ship"].Sub(at["place"])
	require.GreaterOrEqual(t, gap, 72*time.Hour, "the join waits for the wait")
	require.Less(t, gap, 72*time.Hour+2*time.Minute, "within a sweep or two of its due time")
}
