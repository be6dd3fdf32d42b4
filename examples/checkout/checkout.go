// Package checkout is a payment whose provider confirms it by webhook: a
// callback step with an agent (docs/workflows.md, "Agent-issued tokens";
// Step Functions' .waitForTaskToken with a task). The stock is reserved;
// the payments agent starts the payment and hands the provider the step's
// token; the provider's webhook completes the step with that token
// (package completion, or a complete message on the intake queue) once
// the payment settles, and the order ships. The agent's answer only says
// the payment started. A declined payment ends the order Rejected; no
// confirmation within a day gives the step up (an operator alerted).
// Either way the payment is refunded, since it may have started, and the
// stock released.
package checkout

import (
	"context"
	"fmt"
	"time"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/workflow"
)

// Workflows are the application's workflows.
func Workflows() []workflow.Workflow {
	return []workflow.Workflow{{Name: "checkout", Steps: []workflow.Step{
		{Name: "reserve", Agent: "stock", Action: "reserve", Undo: "release", Timeout: workflow.Duration(10 * time.Second)},
		{Name: "pay", Agent: "payments", Action: "start payment", Undo: "refund", Timeout: workflow.Duration(10 * time.Second),
			Retry:    &workflow.Retry{MaximumAttempts: 3},
			Callback: &workflow.Callback{Timeout: workflow.Duration(24 * time.Hour)}},
		{Name: "ship", Agent: "stock", Action: "ship", Timeout: workflow.Duration(10 * time.Second)},
	}}}
}

// Cart is an order's payload.
type Cart struct {
	SKU    string `json:"sku"`
	Amount int    `json:"amount"`
}

// Payment is what the provider's webhook completes the pay step with.
type Payment struct {
	ID string `json:"paymentId"`
}

// Provider is the payment provider. Start starts a payment under key (at
// most once per key) and keeps token: its webhook completes the step with
// it when the payment settles. Each call of a new attempt brings a new
// token, which replaces the one kept: only the newest completes the step.
type Provider interface {
	Start(ctx context.Context, key string, amount int, token string) error
	Refund(ctx context.Context, key string) error
}

// Warehouse holds and ships the stock, at most once per key.
type Warehouse interface {
	Reserve(ctx context.Context, key, sku string) error
	Release(ctx context.Context, key string) error
	Ship(ctx context.Context, key, sku, paymentID string) error
}

// Payments is the agent that starts payments and refunds them.
func Payments(p Provider) *agent.Agent {
	return agent.New("payments").Step("pay", func(ctx context.Context, req agent.Request) (any, error) {
		var c Cart
		if err := req.DecodePayload(&c); err != nil || c.Amount <= 0 {
			return nil, agent.Permanent(fmt.Errorf("not a cart: %v", err))
		}
		return nil, p.Start(ctx, req.IdempotencyKey, c.Amount, req.Token)
	}, func(ctx context.Context, req agent.Request) (any, error) {
		return nil, p.Refund(ctx, req.IdempotencyKey)
	})
}

// Stock is the agent of the warehouse.
func Stock(w Warehouse) *agent.Agent {
	return agent.New("stock").
		Step("reserve", func(ctx context.Context, req agent.Request) (any, error) {
			var c Cart
			if err := req.DecodePayload(&c); err != nil || c.SKU == "" {
				return nil, agent.Permanent(fmt.Errorf("not a cart: %v", err))
			}
			return nil, w.Reserve(ctx, req.IdempotencyKey, c.SKU)
		}, func(ctx context.Context, req agent.Request) (any, error) {
			return nil, w.Release(ctx, req.IdempotencyKey)
		}).
		Step("ship", func(ctx context.Context, req agent.Request) (any, error) {
			var c Cart
			var p Payment
			if err := req.DecodePayload(&c); err != nil {
				return nil, agent.Permanent(err)
			}
			if err := req.DecodeResult("pay", &p); err != nil || p.ID == "" {
				return nil, agent.Permanent(fmt.Errorf("no payment id in the payment's result: %v", err))
			}
			return nil, w.Ship(ctx, req.IdempotencyKey, c.SKU, p.ID)
		}, nil)
}
