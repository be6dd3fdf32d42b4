// Package stock is an order of several line items: stock is held for each
// line, up to three lines at a time, then the customer is charged the
// total (docs/workflows.md, "Fan-out over a list"). The hold is a fan-out
// step: one request per line, each with its own idempotency key
// ("<order>:0:i<line>") and its own undo, and the holds' results come back
// to the payment in the lines' order. When a line cannot be held, or the
// card is declined, every hold that was made is released, newest line
// first: no table of the application's own keeps track of them.
package stock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/workflow"
)

// Workflows are the application's workflows: "order" holds each line's
// stock, three lines at a time, then charges the card.
func Workflows() []workflow.Workflow {
	return []workflow.Workflow{{Name: "order", Steps: []workflow.Step{
		{Name: "hold", Agent: "warehouse", Action: "hold", Undo: "release", Timeout: workflow.Duration(10 * time.Second),
			ForEach: &workflow.ForEach{Items: "payload.lines", Concurrency: 3}},
		{Name: "charge", Agent: "payments", Action: "charge", Timeout: workflow.Duration(10 * time.Second)},
	}}}
}

// Order is an order's payload.
type Order struct {
	Customer string `json:"customer"`
	Lines    []Line `json:"lines"`
}

// Line is one line item: a fan-out element (agent.Request.Item).
type Line struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

// Hold is what a line's hold returns: the hold to release, and what the
// line costs. The hold step's result is the list of them, in line order.
type Hold struct {
	ID    string `json:"holdId"`
	Cents int    `json:"cents"`
}

// Charge is what the charge returns.
type Charge struct {
	ID    string `json:"chargeId"`
	Cents int    `json:"cents"`
}

// ErrOutOfStock is the warehouse's answer for a line it cannot hold.
var ErrOutOfStock = errors.New("out of stock")

// ErrDeclined is the bank's answer for a card it declines.
var ErrDeclined = errors.New("card declined")

// Inventory is the warehouse's service. Each effect is made at most once
// per idempotency key, as the remote services of docs/agents.md are.
type Inventory interface {
	// Hold holds qty of sku, returning the hold and its price; an error
	// that errors.Is ErrOutOfStock when there are not enough.
	Hold(ctx context.Context, key, sku string, qty int) (Hold, error)
	// Release releases a hold; releasing one released already is a no-op.
	Release(ctx context.Context, key, holdID string) error
}

// Bank is the payment service.
type Bank interface {
	// Charge charges the customer; an error that errors.Is ErrDeclined
	// when the card is declined.
	Charge(ctx context.Context, key, customer string, cents int) (Charge, error)
}

// Warehouse is the agent of the hold step: it runs once per line. A line
// out of stock fails the step for good (the order is compensated: every
// line held is released); its undo releases its own line's hold, named by
// its own result.
func Warehouse(inv Inventory) *agent.Agent {
	return agent.New("warehouse").Step("hold", func(ctx context.Context, req agent.Request) (any, error) {
		var l Line
		if err := req.DecodeItem(&l); err != nil {
			return nil, err
		}
		if l.SKU == "" || l.Qty < 1 {
			return nil, agent.Permanent(fmt.Errorf("line %d: a line needs a sku and a quantity", req.Index))
		}
		h, err := inv.Hold(ctx, req.IdempotencyKey, l.SKU, l.Qty)
		if errors.Is(err, ErrOutOfStock) {
			return nil, agent.Permanent(fmt.Errorf("line %d (%s): %w", req.Index, l.SKU, err))
		}
		return h, err
	}, func(ctx context.Context, req agent.Request) (any, error) {
		var h Hold
		if !req.HasResult("hold") {
			return nil, nil // the line was refused: nothing was held
		}
		if err := req.DecodeResult("hold", &h); err != nil {
			return nil, err
		}
		return nil, inv.Release(ctx, req.IdempotencyKey, h.ID)
	})
}

// Payments is the agent of the charge: it charges the sum of the lines'
// prices, read from the hold step's result. A declined card is a business
// outcome (agent.Reject): the holds are released, the order ends Rejected,
// and no operator is paged.
func Payments(bank Bank) *agent.Agent {
	return agent.New("payments").Step("charge", func(ctx context.Context, req agent.Request) (any, error) {
		var o Order
		var holds []Hold
		if err := req.DecodePayload(&o); err != nil {
			return nil, err
		}
		if err := req.DecodeResult("hold", &holds); err != nil {
			return nil, err
		}
		total := 0
		for _, h := range holds {
			total += h.Cents
		}
		c, err := bank.Charge(ctx, req.IdempotencyKey, o.Customer, total)
		if errors.Is(err, ErrDeclined) {
			return nil, agent.Reject(err)
		}
		return c, err
	}, nil)
}
