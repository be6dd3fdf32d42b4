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

// expense: a person approves (a callback step), then it is paid.
var expense = []workflow.Workflow{{Name: "expense", Steps: []workflow.Step{
	{Name: "approve", Callback: &workflow.Callback{Timeout: workflow.Duration(72 * time.Hour), Heartbeat: workflow.Duration(6 * time.Hour)}},
	{Name: "pay", Agent: "payments", Action: "pay", Undo: "refund", Timeout: workflow.Duration(10 * time.Second)},
}}}

func expenseEnv(t *testing.T) (*sastest.Env, *[]string) {
	var paidBy []string
	pay := agent.New("payments").Step("pay", func(_ context.Context, req agent.Request) (any, error) {
		var a struct {
			By string `json:"approvedBy"`
		}
		if err := req.DecodeResult("approve", &a); err != nil {
			return nil, err
		}
		paidBy = append(paidBy, a.By)
		return nil, nil
	}, ok)
	return sastest.New(t, expense, pay), &paidBy
}

// A person approves two days in, heartbeating every five hours: the
// result flows to the payment; 48 hours of virtual time pass in
// milliseconds.
func TestAnAnsweredCallbackStepCompletes(t *testing.T) {
	t.Parallel()
	env, paidBy := expenseEnv(t)
	env.Answer("approve", sastest.Answer{After: 48 * time.Hour, Heartbeat: 5 * time.Hour, Result: map[string]string{"approvedBy": "alice"}})
	start := env.Now()
	wall := time.Now()
	res := env.Run("expense", "e-1", nil)
	require.Equal(t, sastest.StatusProcessed, res.Status)
	require.Equal(t, []string{"alice"}, *paidBy)
	require.GreaterOrEqual(t, env.Now().Sub(start), 48*time.Hour, "the answer came after two days of virtual time")
	require.Less(t, time.Since(wall), 10*time.Second, "two days of virtual time in well under the wall clock's seconds")
}

// Without heartbeats a step with a heartbeat timeout is given up at its
// first missed heartbeat; without an answer at all, at its timeout. A
// refusal is compensated, a rejection ends Rejected.
func TestAnUnansweredCallbackStepIsGivenUp(t *testing.T) {
	t.Parallel()
	env, paidBy := expenseEnv(t)
	env.Answer("approve", sastest.Answer{After: 48 * time.Hour, Result: map[string]string{"approvedBy": "late"}})
	start := env.Now()
	res := env.Run("expense", "e-2", nil)
	require.Equal(t, sastest.StatusFailed, res.Status)
	require.Empty(t, *paidBy)
	require.Less(t, env.Now().Sub(start), 7*time.Hour, "given up at the missed heartbeat (6h), not at the answer")
	require.Len(t, res.Alerts, 2, "the waiting notification and the give-up")

	env.Answer("approve", sastest.Answer{After: time.Hour, Fail: "over budget", Reject: true})
	res = env.Run("expense", "e-3", nil)
	require.Equal(t, sastest.StatusRejected, res.Status)
	require.Empty(t, *paidBy)
}

// Cancelled two hours into a three-day wait: the wait ends then, not at
// its timeout; the charge is refunded, the shipment never starts, the
// order ends cancelled, and the only alert is the waiting notification.
func TestCancelWhileACallbackStepWaits(t *testing.T) {
	t.Parallel()
	flow := []workflow.Workflow{{Name: "approved-charge", Steps: []workflow.Step{
		{Name: "charge", Agent: "payments", Action: "charge", Undo: "refund", Timeout: workflow.Duration(10 * time.Second)},
		{Name: "approve", Callback: &workflow.Callback{Timeout: workflow.Duration(72 * time.Hour)}},
		{Name: "ship", Agent: "payments", Action: "ship", Timeout: workflow.Duration(10 * time.Second)},
	}}}
	pay := agent.New("payments").Step("charge", ok, ok).Step("ship", ok, nil)
	env := sastest.New(t, flow, pay)
	env.Answer("approve", sastest.Answer{After: 2 * time.Hour, Cancel: true})
	res := env.Run("approved-charge", "c-1", nil)
	require.Equal(t, sastest.StatusCancelled, res.Status)
	require.GreaterOrEqual(t, res.Took, 2*time.Hour)
	require.Less(t, res.Took, 3*time.Hour, "the wait ended at the cancel, not at its 72-hour timeout")
	require.Equal(t, []string{"charge"}, res.Undone)
	require.Equal(t, sastest.StateError, res.Steps[1].State, "the wait ended")
	require.Equal(t, sastest.StatePending, res.Steps[2].State, "ship never started")
	require.Len(t, res.Alerts, 1, "the waiting notification only: a cancel pages nobody")
	require.Equal(t, "cancelled/approve", res.Statuses[len(res.Statuses)-1])
}
