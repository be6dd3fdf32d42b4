// Package expense is Temporal's expense sample, ported: an expense is
// reserved against its budget, a person approves or rejects it, and an
// approved one is paid. Nothing polls while the person thinks: the approval
// is a callback step (docs/workflows.md, "Callback steps"), completed with
// the token its waiting status hands out (package completion, or `sasctl
// complete`). A rejection ends the order Rejected, the budget released; no
// answer within three days gives the step up (an operator alerted) and
// releases it too.
package expense

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/workflow"
)

// Workflows are the application's workflows.
func Workflows() []workflow.Workflow {
	return []workflow.Workflow{{Name: "expense", Steps: []workflow.Step{
		{Name: "reserve", Agent: "finance", Action: "reserve budget", Undo: "release budget", Timeout: workflow.Duration(10 * time.Second)},
		{Name: "approve", Callback: &workflow.Callback{Timeout: workflow.Duration(72 * time.Hour)}},
		{Name: "pay", Agent: "finance", Action: "pay", Timeout: workflow.Duration(10 * time.Second)},
	}}}
}

// Expense is an order's payload.
type Expense struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// Approval is what the approver sends as the approval step's result.
type Approval struct {
	By string `json:"approvedBy"`
}

// Ledger is the finance service the agent calls. Each effect is made at
// most once per idempotency key.
type Ledger interface {
	Reserve(ctx context.Context, key string, amount int) error
	Release(ctx context.Context, key string) error
	Pay(ctx context.Context, key string, amount int, approvedBy string) error
}

// Finance is the agent of the budget and the payment.
func Finance(l Ledger) *agent.Agent {
	return agent.New("finance").
		Step("reserve", func(ctx context.Context, req agent.Request) (any, error) {
			var e Expense
			if err := req.DecodePayload(&e); err != nil || e.Amount <= 0 {
				return nil, agent.Permanent(fmt.Errorf("not an expense: %v", err))
			}
			return nil, l.Reserve(ctx, req.IdempotencyKey, e.Amount)
		}, func(ctx context.Context, req agent.Request) (any, error) {
			return nil, l.Release(ctx, req.IdempotencyKey)
		}).
		Step("pay", func(ctx context.Context, req agent.Request) (any, error) {
			var e Expense
			var a Approval
			if err := req.DecodePayload(&e); err != nil {
				return nil, agent.Permanent(err)
			}
			if err := req.DecodeResult("approve", &a); err != nil || a.By == "" {
				return nil, agent.Permanent(errors.New("no approver in the approval's result"))
			}
			return nil, l.Pay(ctx, req.IdempotencyKey, e.Amount, a.By)
		}, nil)
}
