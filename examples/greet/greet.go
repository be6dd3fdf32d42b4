// Package greet is the README's tutorial, whole: a two-step workflow that
// reserves a gift at a shop, then sends a card, and releases the gift when
// the card cannot be sent.
package greet

import (
	"context"
	"errors"
	"time"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/workflow"
)

// Workflows are the application's workflows.
func Workflows() []workflow.Workflow {
	return []workflow.Workflow{{Name: "greet", Steps: []workflow.Step{
		{Name: "gift", Agent: "shop", Action: "reserve a gift", Undo: "release the gift", Timeout: workflow.Duration(10 * time.Second)},
		{Name: "card", Agent: "mail", Action: "send a card", Timeout: workflow.Duration(10 * time.Second)},
	}}}
}

// Order is an order's payload.
type Order struct{ To, Gift string }

// ShopService and MailService are the remote services the agents call.
// Each effect is made at most once per idempotency key.
type ShopService interface {
	Reserve(ctx context.Context, key, gift string) (string, error)
	Release(ctx context.Context, key string) error
}

type MailService interface {
	Send(ctx context.Context, key, to string) error
}

// Shop is the agent of the shop's steps.
func Shop(shop ShopService) *agent.Agent {
	return agent.New("shop").Step("gift",
		func(ctx context.Context, req agent.Request) (any, error) { // reserve, under req.IdempotencyKey
			var o Order
			if err := req.DecodePayload(&o); err != nil {
				return nil, err // a payload that does not decode is refused for good
			}
			return shop.Reserve(ctx, req.IdempotencyKey, o.Gift)
		},
		func(ctx context.Context, req agent.Request) (any, error) { // the undo
			return nil, shop.Release(ctx, req.IdempotencyKey)
		})
}

// Mail is the agent of the card.
func Mail(mail MailService) *agent.Agent {
	return agent.New("mail").Step("card", func(ctx context.Context, req agent.Request) (any, error) {
		var o Order
		if err := req.DecodePayload(&o); err != nil {
			return nil, err
		}
		if o.To == "" {
			return nil, agent.Permanent(errors.New("no address"))
		}
		return nil, mail.Send(ctx, req.IdempotencyKey, o.To)
	}, nil)
}
