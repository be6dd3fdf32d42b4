package sastest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/sastest"
	"github.com/sas-go/sas/workflow"
)

// An order cancelled while its hotel is booked: the hotel settles, the
// payment never starts, the hotel then the flight are undone, and the
// order ends cancelled with nobody paged.
func TestCancelAnOrderMidRun(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	env.CancelWhen("order-1", "hotel")
	res := env.Run("trip", "order-1", nil)
	require.Equal(t, sastest.StatusCancelled, res.Status)
	require.Equal(t, []string{"flight#1", "hotel#1", "hotel#1 undo", "flight#1 undo"}, calls(res), "the hotel settles; the payment never starts")
	require.Equal(t, []string{"hotel", "flight"}, res.Undone)
	require.Equal(t, sastest.StatePending, res.Steps[2].State)
	require.Equal(t, 0, res.Steps[2].Attempts)
	require.Empty(t, res.Alerts)
	require.Equal(t, "cancelled/hotel", res.Statuses[len(res.Statuses)-1])

	other := env.Run("trip", "order-2", nil)
	require.Equal(t, sastest.StatusProcessed, other.Status, "a cancel is aimed at its order")
}

// A fault aimed at one order's step fails that order alone; cleared, the
// step runs again in the orders after.
func TestFailOneOrdersStepAndClearIt(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	env.FailOrder("order-1", "pay", 1, agent.Permanent(errors.New("card declined")))
	env.Fail("hotel", 1, errors.New("every order's hotel times out once"))
	require.Equal(t, sastest.StatusCompensated, env.Run("trip", "order-1", nil).Status)
	require.Equal(t, sastest.StatusProcessed, env.Run("trip", "order-2", nil).Status, "another order's payment runs")

	env.FailOrder("order-3", "pay", 1, agent.Permanent(errors.New("card declined")))
	env.Clear("pay")
	env.Clear("hotel")
	res := env.Run("trip", "order-3", nil)
	require.Equal(t, sastest.StatusProcessed, res.Status, "cleared")
	require.Equal(t, []string{"flight#1", "hotel#1", "pay#1"}, calls(res), "no fault left: one attempt each")
}

// split is a workflow with branches: the flight, then the hotel and the
// car at once, then the payment once both are booked.
var split = []workflow.Workflow{{Name: "split", Steps: []workflow.Step{
	{Name: "flight", Agent: "airline", Action: "book", Undo: "cancel", Timeout: workflow.Duration(30 * time.Second)},
	{Name: "hotel", Agent: "hotels", Action: "book", Undo: "cancel", Timeout: workflow.Duration(30 * time.Second), After: []string{"flight"}},
	{Name: "car", Agent: "cars", Action: "rent", Undo: "return", Timeout: workflow.Duration(30 * time.Second), After: []string{"flight"}},
	{Name: "pay", Agent: "payments", Action: "charge", Timeout: workflow.Duration(20 * time.Second), After: []string{"hotel", "car"}},
}}}

// An order cancelled while two branches are in flight: each is let to
// settle (both run, and one fails meanwhile), the payment that joins them
// never starts, and every step that took effect, or may have, in both
// branches is undone, the flight last; the order ends cancelled with
// nobody paged. Another order runs on.
func TestCancelAnOrderWithTwoBranchesInFlight(t *testing.T) {
	t.Parallel()
	env := sastest.New(t, split,
		agent.New("airline").Step("flight", ok, ok),
		agent.New("hotels").Step("hotel", ok, ok),
		agent.New("cars").Step("car", ok, ok),
		agent.New("payments").Step("pay", ok, nil))
	env.CancelWhen("order-1", "hotel")
	env.FailOrder("order-1", "car", 1, agent.Permanent(errors.New("no cars left")))
	res := env.Run("split", "order-1", nil)
	require.Equal(t, sastest.StatusCancelled, res.Status)
	require.Equal(t, []string{"flight#1", "hotel#1", "car#1", "car#1 undo", "hotel#1 undo", "flight#1 undo"}, calls(res),
		"both branches settle, then every one is undone, newest first; the payment never starts")
	require.Equal(t, sastest.StatePending, res.Steps[3].State)
	require.Equal(t, 0, res.Steps[3].Attempts)
	require.Empty(t, res.Alerts, "a cancel pages nobody, a branch that failed after it included")
	require.Equal(t, "cancelled/hotel", res.Statuses[len(res.Statuses)-1])

	other := env.Run("split", "order-2", nil)
	require.Equal(t, sastest.StatusProcessed, other.Status)
}
