package expense_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/examples/expense-choice"
	"github.com/sas-go/sas/sastest"
	"github.com/sas-go/sas/workflow"
)

func agents(d *expense.Demo) []*agent.Agent {
	return []*agent.Agent{expense.Expenses(d), expense.Bank(d), expense.Mail(d)}
}

// Approved: paid, and the notice skipped. Declined: told, and the payment
// skipped. The branch taken is in the statuses and the steps' states.
func TestApprovedIsPaidDeclinedIsTold(t *testing.T) {
	d := expense.NewDemo(500_00)
	env := sastest.New(t, expense.Workflows(), agents(d)...)

	res := env.Run("expense", "x-1", expense.Claim{Employee: "ada", Amount: 120_00})
	require.Equal(t, sastest.StatusProcessed, res.Status)
	pay, _ := res.Step("pay")
	notify, _ := res.Step("notify")
	require.Equal(t, sastest.StateProcessed, pay.State)
	require.Equal(t, sastest.StateSkipped, notify.State)
	require.Contains(t, notify.Reason, "!results.approve.approved is false")
	require.Equal(t, []string{"received", "step-done/file", "step-done/approve", "step-done/pay", "step-skipped/notify", "processed"}, res.Statuses)
	var a expense.Approval
	require.NoError(t, res.Decode("approve", &a))
	require.True(t, a.Approved)
	require.Len(t, d.Paid, 1)

	res = env.Run("expense", "x-2", expense.Claim{Employee: "alan", Amount: 900_00})
	require.Equal(t, sastest.StatusProcessed, res.Status, "a declined expense is a business outcome: the order completes")
	pay, _ = res.Step("pay")
	require.Equal(t, sastest.StateSkipped, pay.State)
	require.Equal(t, []string{"received", "step-done/file", "step-done/approve", "step-skipped/pay", "step-done/notify", "processed"}, res.Statuses)
	for _, c := range res.Calls {
		require.NotEqual(t, "pay", c.Step, "a skipped step is never called")
	}
	require.Len(t, d.Paid, 1, "nothing paid for the declined one")
	require.Len(t, d.Told, 1)
}

// An approval that does not say approved or not: the conditions cannot be
// evaluated, which fails the step for good (an operator is alerted) and
// undoes what was done (the expense is withdrawn); pay is never called.
func TestAnApprovalThatSaysNothingFailsThePayment(t *testing.T) {
	d := expense.NewDemo(500_00)
	mute := agent.New("expenses").
		Step("file", func(ctx context.Context, req agent.Request) (any, error) {
			id, err := d.File(ctx, req.IdempotencyKey, expense.Claim{Employee: "ada", Amount: 1})
			return expense.Filed{ID: id}, err
		}, func(ctx context.Context, req agent.Request) (any, error) {
			var f expense.Filed
			if err := req.DecodeResult("file", &f); err != nil {
				return nil, err
			}
			return nil, d.Withdraw(ctx, f.ID)
		}).
		Step("approve", func(context.Context, agent.Request) (any, error) { return map[string]string{"status": "pending"}, nil }, nil)
	env := sastest.New(t, expense.Workflows(), mute, expense.Bank(d), expense.Mail(d))
	res := env.Run("expense", "x-3", expense.Claim{Employee: "ada", Amount: 10_00})
	require.Equal(t, sastest.StatusCompensated, res.Status)
	pay, _ := res.Step("pay")
	require.Equal(t, sastest.StateError, pay.State)
	require.Contains(t, pay.Reason, "ConditionFailed")
	require.Contains(t, pay.Reason, "no such key: approved")
	require.Equal(t, 0, pay.Attempts, "never called")
	require.Equal(t, []string{"file"}, res.Undone)
	require.Len(t, res.Alerts, 1)
	require.Empty(t, d.Filed, "withdrawn")
}

// workflows.json is the Go definition, written out by
// `sasctl workflows write github.com/sas-go/sas/examples/expense-choice Workflows`.
func TestWorkflowsFile(t *testing.T) {
	fromFile, err := workflow.Load("workflows.json")
	require.NoError(t, err)
	require.Equal(t, expense.Workflows(), fromFile)
}
