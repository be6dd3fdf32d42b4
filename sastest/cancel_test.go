package sastest_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/sastest"
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
