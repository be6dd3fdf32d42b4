// Package booking is the example's travel agent: the steps flight, hotel
// and car of the trip workflow, each a hold with its supplier (package
// inventory) under the step's idempotency key. A hold's result is its
// booking (the supplier's reference): the scheduler records it, the steps
// after it see it (the payment lists them), and the step's undo cancels the
// booking by that reference, with no table of the agent's own.
package booking

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/examples/travel/inventory"
	"github.com/sas-go/sas/examples/travel/trip"
)

// Suppliers are the services the travel agent books with.
type Suppliers struct {
	Airline, Hotels, Cars *inventory.Inventory
}

// FullHotel is the hotel of the demo suppliers that has no room left: a
// trip to it is refused at the hotel step, and its flight released.
const FullHotel = "full"

// SlowHotel is the hotel of the demo suppliers that takes SlowHold to
// confirm a room: a trip to it has its hotel step in flight that long, time
// enough to cancel the trip while the step runs (the cancel lets it settle,
// then releases the room and the flight).
const SlowHotel = "slow"

// SlowHold is how long SlowHotel takes to confirm, well within the hotel
// step's 30 s timeout.
const SlowHold = 8 * time.Second

// DemoSuppliers are the suppliers the example runs with, in memory: 100
// seats on every flight, 50 rooms in every hotel but FullHotel, which has
// none, and 20 cars of every class; SlowHotel answers after SlowHold.
// Deployed, each instance of the agent's function has its own: a demo, not
// a booking system.
func DemoSuppliers() Suppliers {
	hotels := inventory.New("hotels", map[string]int{FullHotel: 0}, 50)
	hotels.SetSlow(SlowHotel, SlowHold)
	return Suppliers{
		Airline: inventory.New("airline", nil, 100),
		Hotels:  hotels,
		Cars:    inventory.New("cars", nil, 20),
	}
}

// Agent is the travel agent, serving the steps flight, hotel and car with
// s. The options tune its in-process retries (agent.Tries, agent.Backoff).
func Agent(s Suppliers, opts ...agent.Option) *agent.Agent {
	return agent.New(trip.TravelAgent, opts...).
		Step(trip.Flight, hold(s.Airline, "flight", func(p trip.Payload) string { return p.Flight }), release(s.Airline)).
		Step(trip.Hotel, hold(s.Hotels, "hotel", func(p trip.Payload) string { return p.Hotel }), release(s.Hotels)).
		Step(trip.Car, hold(s.Cars, "car", func(p trip.Payload) string { return p.Car }), release(s.Cars))
}

// hold holds the item of the payload that item picks, under the step's key.
func hold(inv *inventory.Inventory, what string, item func(trip.Payload) string) agent.Func {
	return func(ctx context.Context, req agent.Request) (any, error) {
		var p trip.Payload
		if err := req.DecodePayload(&p); err != nil {
			return nil, err // permanent: it will never decode
		}
		name := item(p)
		if name == "" {
			return nil, agent.Permanent(fmt.Errorf("the order names no %s", what))
		}
		h, err := inv.HoldCtx(ctx, req.IdempotencyKey, name)
		switch {
		case errors.Is(err, inventory.ErrSoldOut):
			// The supplier's answer, not an incident: the trip is rejected
			// and nobody is paged.
			return nil, agent.Reject(fmt.Errorf("%s %q: %w", what, name, err))
		case errors.Is(err, inventory.ErrCancelled):
			return nil, agent.Permanent(fmt.Errorf("%s %q: %w", what, name, err))
		case err != nil:
			return nil, fmt.Errorf("holding %s %q: %w", what, name, err) // transient: tried again, same key
		}
		return h, nil
	}
}

// release undoes the step's hold: by its booking reference, the step's
// own result, when it recorded one; otherwise (the step was refused, or
// its success came after it was given up, so nothing was recorded) by the
// step's key, which cancels a hold that may still arrive (an undo commutes
// with what it undoes: docs/protocol.md, "Idempotency keys").
func release(inv *inventory.Inventory) agent.Func {
	return func(_ context.Context, req agent.Request) (any, error) {
		if req.HasResult(req.Step) {
			var h inventory.Hold
			if err := req.DecodeResult(req.Step, &h); err != nil {
				return nil, err
			}
			err := inv.Cancel(h.Ref)
			if errors.Is(err, inventory.ErrUnknownRef) {
				// The service knows no such booking: nothing to cancel
				// under that reference (the demo's inventory is one per
				// process, and a deployed undo may run in another process
				// than its hold). Release by the key, a no-op where nothing
				// was held: undoing what never took effect is a no-op.
				return nil, inv.Release(strings.TrimSuffix(req.IdempotencyKey, ":undo"))
			}
			if err != nil {
				return nil, agent.Permanent(err)
			}
			return nil, nil
		}
		// The undo's key is the step's with ":undo".
		return nil, inv.Release(strings.TrimSuffix(req.IdempotencyKey, ":undo"))
	}
}
