// Package payments is the example's payments agent: the step pay of the
// trip workflow charges the traveller's card (package bank) under the
// step's idempotency key, for the bookings the steps before it made (their
// results), and its undo refunds the charge. A declined card is a business
// rejection (agent.Reject): the trip is undone and nobody is paged.
package payments

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/examples/travel/bank"
	"github.com/sas-go/sas/examples/travel/inventory"
	"github.com/sas-go/sas/examples/travel/trip"
)

// DemoLimit is the demo bank's limit: a trip over 2000 EUR is declined,
// and everything booked for it released.
const DemoLimit = 2000

// Agent is the payments agent, serving the step pay with b. The options
// tune its in-process retries (agent.Tries, agent.Backoff).
func Agent(b *bank.Bank, opts ...agent.Option) *agent.Agent {
	return agent.New(trip.PaymentsAgent, opts...).Step(trip.Pay, charge(b), refund(b))
}

func charge(b *bank.Bank) agent.Func {
	return func(_ context.Context, req agent.Request) (any, error) {
		var p trip.Payload
		if err := req.DecodePayload(&p); err != nil {
			return nil, err
		}
		// What is paid for: the bookings of the steps before, from their
		// results.
		var itinerary []string
		for _, step := range []string{trip.Flight, trip.Hotel, trip.Car} {
			var h inventory.Hold
			if err := req.DecodeResult(step, &h); err != nil {
				return nil, err
			}
			itinerary = append(itinerary, h.Ref)
		}
		r, err := b.Charge(req.IdempotencyKey, p.Amount)
		switch {
		case errors.Is(err, bank.ErrDeclined):
			return nil, agent.Reject(fmt.Errorf("charging %s: %w", p.Traveller, err))
		case errors.Is(err, bank.ErrCancelled):
			return nil, agent.Permanent(fmt.Errorf("charging %s: %w", p.Traveller, err))
		case err != nil:
			return nil, fmt.Errorf("charging %s: %w", p.Traveller, err)
		}
		return Paid{Receipt: r, Itinerary: itinerary}, nil
	}
}

// Paid is the step pay's result: the charge, and the bookings it paid for.
type Paid struct {
	bank.Receipt
	Itinerary []string `json:"itinerary"`
}

func refund(b *bank.Bank) agent.Func {
	return func(_ context.Context, req agent.Request) (any, error) {
		// The undo's key is the charge's with ":undo": the refund cancels
		// the charge's key (docs/protocol.md, "Idempotency keys").
		return nil, b.Refund(strings.TrimSuffix(req.IdempotencyKey, ":undo"))
	}
}
