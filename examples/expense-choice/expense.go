// Package expense (examples/expense-choice) is a choice (docs/workflows.md, "Choices"), after
// Temporal's expense sample: an expense is filed, then a manager approves
// or declines it; if approved it is paid, otherwise the employee is told.
// The two branches are two steps with conditions on the approval's result,
// so statuses, sasctl show and the console name the branch taken (the
// other step is Skipped), with no switch inside one step.
package expense

import (
	"context"
	"errors"
	"time"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/workflow"
)

// Workflows are the application's workflows.
func Workflows() []workflow.Workflow {
	d := workflow.Duration(10 * time.Second)
	return []workflow.Workflow{{Name: "expense", Steps: []workflow.Step{
		{Name: "file", Agent: "expenses", Action: "file the expense", Undo: "withdraw the expense", Timeout: d},
		{Name: "approve", Agent: "expenses", Action: "ask the manager", Timeout: d},
		{Name: "pay", Agent: "bank", Action: "pay the employee", Timeout: d, When: "results.approve.approved"},
		{Name: "notify", Agent: "mail", Action: "tell the employee it was declined", Timeout: d, When: "!results.approve.approved"},
	}}}
}

// Claim is an order's payload.
type Claim struct {
	Employee string `json:"employee"`
	Amount   int    `json:"amount"` // cents
}

// Approval is what the approve step returns, and the conditions read.
type Approval struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
}

// Filed is what the file step returns.
type Filed struct {
	ID string `json:"id"`
}

// Services are the remote services the agents call. Each effect is made
// at most once per idempotency key.
type Services interface {
	File(ctx context.Context, key string, c Claim) (string, error)
	Withdraw(ctx context.Context, expenseID string) error
	Decide(ctx context.Context, key string, c Claim) (Approval, error)
	Pay(ctx context.Context, key, expenseID string, c Claim) error
	Tell(ctx context.Context, key, employee, why string) error
}

// Expenses is the agent of the filing and the approval.
func Expenses(s Services) *agent.Agent {
	return agent.New("expenses").
		Step("file", func(ctx context.Context, req agent.Request) (any, error) {
			c, err := claim(req)
			if err != nil {
				return nil, err
			}
			id, err := s.File(ctx, req.IdempotencyKey, c)
			return Filed{ID: id}, err
		}, func(ctx context.Context, req agent.Request) (any, error) {
			// The undo sees its own step's result: the expense's id.
			var f Filed
			if err := req.DecodeResult("file", &f); err != nil {
				return nil, nil // never filed: nothing to withdraw
			}
			return nil, s.Withdraw(ctx, f.ID)
		}).
		Step("approve", func(ctx context.Context, req agent.Request) (any, error) {
			c, err := claim(req)
			if err != nil {
				return nil, err
			}
			return s.Decide(ctx, req.IdempotencyKey, c)
		}, nil)
}

// Bank is the agent that pays an approved expense.
func Bank(s Services) *agent.Agent {
	return agent.New("bank").Step("pay", func(ctx context.Context, req agent.Request) (any, error) {
		c, err := claim(req)
		if err != nil {
			return nil, err
		}
		var f Filed
		if err := req.DecodeResult("file", &f); err != nil {
			return nil, agent.Permanent(err)
		}
		return nil, s.Pay(ctx, req.IdempotencyKey, f.ID, c)
	}, nil)
}

// Mail is the agent that tells the employee of a declined expense.
func Mail(s Services) *agent.Agent {
	return agent.New("mail").Step("notify", func(ctx context.Context, req agent.Request) (any, error) {
		c, err := claim(req)
		if err != nil {
			return nil, err
		}
		var a Approval
		if err := req.DecodeResult("approve", &a); err != nil {
			return nil, agent.Permanent(err)
		}
		return nil, s.Tell(ctx, req.IdempotencyKey, c.Employee, "declined by "+a.By)
	}, nil)
}

func claim(req agent.Request) (Claim, error) {
	var c Claim
	if err := req.DecodePayload(&c); err != nil {
		return c, err // a payload that does not decode is refused for good
	}
	if c.Employee == "" || c.Amount <= 0 {
		return c, agent.Permanent(errors.New("an expense needs an employee and an amount"))
	}
	return c, nil
}
