package trip_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/examples/travel/bank"
	"github.com/sas-go/sas/examples/travel/booking"
	"github.com/sas-go/sas/examples/travel/inventory"
	"github.com/sas-go/sas/examples/travel/payments"
	"github.com/sas-go/sas/examples/travel/trip"
	"github.com/sas-go/sas/sastest"
	"github.com/sas-go/sas/workflow"
)

// The workflow file a deployment may load is the Go definition, written
// out.
func TestTheFileIsTheGoDefinition(t *testing.T) {
	t.Parallel()
	fromFile, err := workflow.Load("../workflows.json")
	require.NoError(t, err)
	require.Equal(t, trip.Workflows(), fromFile)
}

// world is one deployment of the example in the test: the agents on their
// demo services, run by the kit.
type world struct {
	env       *sastest.Env
	suppliers booking.Suppliers
	bank      *bank.Bank
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{suppliers: booking.DemoSuppliers(), bank: bank.New(payments.DemoLimit)}
	w.env = sastest.New(t, trip.Workflows(), booking.Agent(w.suppliers), payments.Agent(w.bank))
	return w
}

// ada's trip, within the card's limit, to a hotel with rooms.
func adasTrip() trip.Payload {
	return trip.Payload{Traveller: "Ada", Flight: "LH 123", Hotel: "Ritz", Car: "compact", Amount: 420}
}

// requireNothingHeld checks that every service is back where it started.
func (w *world) requireNothingHeld(t *testing.T) {
	t.Helper()
	require.Zero(t, w.suppliers.Airline.Held(), "seats held")
	require.Zero(t, w.suppliers.Hotels.Held(), "rooms held")
	require.Zero(t, w.suppliers.Cars.Held(), "cars held")
	require.Zero(t, w.bank.Balance(), "charged")
}

func TestATripIsBooked(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	res := w.env.Run(trip.Name, "trip-1", adasTrip())

	require.Equal(t, sastest.StatusProcessed, res.Status)
	require.Equal(t, []string{"received", "step-done/flight", "step-done/hotel", "step-done/car", "step-done/pay", "processed"}, res.Statuses)
	require.Equal(t, 99, w.suppliers.Airline.Left("LH 123"))
	require.Equal(t, 49, w.suppliers.Hotels.Left("Ritz"))
	require.Equal(t, 19, w.suppliers.Cars.Left("compact"))
	require.Equal(t, 420, w.bank.Balance())
	require.Empty(t, res.Undone)

	// Each booking id flowed on: the payment saw the holds the steps
	// before it made, and lists them in its own result.
	var flight inventory.Hold
	require.NoError(t, res.Decode(trip.Flight, &flight))
	require.Equal(t, inventory.Hold{Ref: "airline-1", Item: "LH 123"}, flight)
	var paid payments.Paid
	require.NoError(t, res.Decode(trip.Pay, &paid))
	require.Equal(t, []string{"airline-1", "hotels-1", "cars-1"}, paid.Itinerary)
	require.Equal(t, 420, paid.Amount)
}

// The hotel is full, a business answer: the trip is rejected, not failed.
// The hotel's booking is released under its key (a refusal is not proof
// that no duplicate request booked it; releasing a booking that was never
// made does nothing; it recorded no booking id), then the flight is
// cancelled by the booking id its step returned; the car and the payment
// are never asked for, and nobody is paged.
func TestAFullHotelReleasesTheFlight(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	p := adasTrip()
	p.Hotel = booking.FullHotel
	res := w.env.Run(trip.Name, "trip-1", p)

	require.Equal(t, sastest.StatusRejected, res.Status)
	require.Empty(t, res.Alerts)
	require.Equal(t, []string{"airline-1"}, w.suppliers.Airline.Cancelled(), "the flight's undo cancelled the booking its step made")
	require.Empty(t, w.suppliers.Hotels.Cancelled(), "the refused hotel had no booking id: released by its key")
	require.Equal(t, []string{trip.Hotel, trip.Flight}, res.Undone)
	hotel, _ := res.Step(trip.Hotel)
	require.Equal(t, sastest.StateCompensated, hotel.State)
	require.Equal(t, `hotel "full": sold out`, hotel.Reason)
	for _, name := range []string{trip.Car, trip.Pay} {
		s, _ := res.Step(name)
		require.Equal(t, sastest.StatePending, s.State, name)
		require.Zero(t, s.Attempts, name)
	}
	require.Equal(t, []string{"received", "step-done/flight", "rejected/hotel"}, res.Statuses)
	w.requireNothingHeld(t)
}

// The card is declined, a business answer: everything booked is cancelled
// by its booking id, newest first, the declined charge's refund included
// (a no-op at the bank: a refusal is not proof that no duplicate request
// charged the card); the trip ends rejected, with the bank's reason, and
// nobody is paged.
func TestADeclinedCardReleasesEverything(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	p := adasTrip()
	p.Amount = 5000
	res := w.env.Run(trip.Name, "trip-1", p)

	require.Equal(t, sastest.StatusRejected, res.Status)
	require.Equal(t, []string{trip.Pay, trip.Car, trip.Hotel, trip.Flight}, res.Undone)
	pay, _ := res.Step(trip.Pay)
	require.True(t, pay.Rejected)
	require.Equal(t, "charging Ada: card declined: 5000 EUR (the limit is 2000 EUR)", pay.Reason)
	require.Equal(t, []string{"received", "step-done/flight", "step-done/hotel", "step-done/car", "rejected/pay"}, res.Statuses)
	require.Empty(t, res.Alerts)
	require.Equal(t, []string{"cars-1"}, w.suppliers.Cars.Cancelled())
	require.Equal(t, []string{"hotels-1"}, w.suppliers.Hotels.Cancelled())
	require.Equal(t, []string{"airline-1"}, w.suppliers.Airline.Cancelled())
	w.requireNothingHeld(t)
}

// The car rental's API is down for the car's whole first attempt: the
// deployment retries (in process, by redelivery, then the supervisor), and
// the trip is booked on the second attempt.
func TestAnOutageIsRetried(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.env.Fail(trip.Car, 1, errors.New("car rental API: connection reset"))
	res := w.env.Run(trip.Name, "trip-1", adasTrip())

	require.Equal(t, sastest.StatusProcessed, res.Status)
	car, _ := res.Step(trip.Car)
	require.Equal(t, 2, car.Attempts)
	require.Equal(t, 19, w.suppliers.Cars.Left("compact"))
}

// The car rental takes the hold but the answer is lost, twice: the agent
// asks again under the same key and gets the hold already made, so one car
// is held, not three.
func TestALostAnswerHoldsOneCar(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.suppliers.Cars.DropAnswers(2)
	res := w.env.Run(trip.Name, "trip-1", adasTrip())

	require.Equal(t, sastest.StatusProcessed, res.Status)
	var carCalls []string
	for _, c := range res.Calls {
		if c.Step == trip.Car {
			carCalls = append(carCalls, c.String())
		}
	}
	require.Equal(t, []string{
		`car#1 → holding car "compact": service unavailable`,
		`car#1 → holding car "compact": service unavailable`,
		"car#1",
	}, carCalls, "tried in process, under the same key")
	require.Equal(t, 1, w.suppliers.Cars.Held())
	require.Equal(t, 19, w.suppliers.Cars.Left("compact"))
}

// A release that fails for a while is retried like any step, and the
// compensation completes.
func TestAFailingReleaseIsRetried(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.env.FailUndo(trip.Hotel, 1, errors.New("the hotel's channel manager is down"))
	p := adasTrip()
	p.Amount = 5000
	res := w.env.Run(trip.Name, "trip-1", p)

	require.Equal(t, sastest.StatusRejected, res.Status)
	require.Equal(t, []string{trip.Pay, trip.Car, trip.Hotel, trip.Flight}, res.Undone)
	w.requireNothingHeld(t)
}

// A release refused for good stops the compensation and alerts an
// operator: the room and the seat stay held until a person sees to them.
func TestARefusedReleaseNeedsAnOperator(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.env.FailUndo(trip.Hotel, 1, agent.Permanent(errors.New("the booking is past its free cancellation")))
	p := adasTrip()
	p.Amount = 5000
	res := w.env.Run(trip.Name, "trip-1", p)

	require.Equal(t, sastest.StatusCompensationFailed, res.Status)
	require.Equal(t, []string{trip.Pay, trip.Car}, res.Undone)
	require.Contains(t, res.Alerts, "hotel: CompensationFailed: the booking is past its free cancellation")
	require.Equal(t, 1, w.suppliers.Hotels.Held())
	require.Equal(t, 1, w.suppliers.Airline.Held())
	require.Zero(t, w.suppliers.Cars.Held())
}

// The holds at once: flight, hotel and car are asked for together, and
// the card is charged once all three are held, with every booking id.
func TestAParallelTripIsBooked(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	res := w.env.Run(trip.ParallelName, "trip-p1", adasTrip())

	require.Equal(t, sastest.StatusProcessed, res.Status)
	require.Equal(t, 420, w.bank.Balance())
	var paid payments.Paid
	require.NoError(t, res.Decode(trip.Pay, &paid))
	require.ElementsMatch(t, []string{"airline-1", "hotels-1", "cars-1"}, paid.Itinerary, "the payment saw all three holds")
}

// Three branches, the hotel's refused (full): the flight and the car, held
// at the same time, are released by their booking ids once they are known,
// the refused hotel by its key; the card is never charged, and nobody is
// paged.
func TestAParallelTripWithAFullHotelReleasesTheOtherBranches(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	p := adasTrip()
	p.Hotel = booking.FullHotel
	res := w.env.Run(trip.ParallelName, "trip-p2", p)

	require.Equal(t, sastest.StatusRejected, res.Status)
	require.Empty(t, res.Alerts)
	require.ElementsMatch(t, []string{trip.Flight, trip.Hotel, trip.Car}, res.Undone, "every branch undone")
	require.Equal(t, []string{"airline-1"}, w.suppliers.Airline.Cancelled())
	require.Equal(t, []string{"cars-1"}, w.suppliers.Cars.Cancelled())
	pay, _ := res.Step(trip.Pay)
	require.Equal(t, sastest.StatePending, pay.State)
	require.Zero(t, pay.Attempts, "the join never passed")
	w.requireNothingHeld(t)
}

// A manager approves the trip an hour after the holds are made: the card is
// charged and the trip is booked, with the approval's result among the
// results the payment sees.
func TestAnApprovedTripIsBooked(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.env.Answer(trip.Approve, sastest.Answer{After: time.Hour, Result: map[string]string{"approvedBy": "Grace"}})
	res := w.env.Run(trip.ApprovalName, "trip-1", adasTrip())

	require.Equal(t, sastest.StatusProcessed, res.Status)
	require.Equal(t, []string{"received", "step-done/flight", "step-done/hotel", "step-done/car", "waiting/approve", "step-done/approve", "step-done/pay", "processed"}, res.Statuses)
	require.Equal(t, 420, w.bank.Balance())
	var approval map[string]string
	require.NoError(t, res.Decode(trip.Approve, &approval))
	require.Equal(t, "Grace", approval["approvedBy"])
}

// Rejected by the manager, or not approved within the timeout: the holds
// are released and the card never charged. A rejection is a business answer
// (nobody paged); a timeout is a give-up (an operator is told).
func TestAnUnapprovedTripReleasesTheHolds(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		answer *sastest.Answer
		status sastest.Status
		alerts int
	}{
		"rejected":  {&sastest.Answer{After: time.Hour, Fail: "over the travel budget", Reject: true}, sastest.StatusRejected, 0},
		"timed out": {nil, sastest.StatusCompensated, 1},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			if c.answer != nil {
				w.env.Answer(trip.Approve, *c.answer)
			}
			res := w.env.Run(trip.ApprovalName, "trip-1", adasTrip())
			require.Equal(t, c.status, res.Status)
			pages := 0 // the alerts that page: a give-up's (the waiting notice tells people the token)
			for _, a := range res.Alerts {
				if strings.Contains(a, ": Error: ") {
					pages++
				}
			}
			require.Equal(t, c.alerts, pages)
			require.Equal(t, []string{trip.Car, trip.Hotel, trip.Flight}, res.Undone, "the holds released, newest first; the approval has nothing to undo")
			pay, _ := res.Step(trip.Pay)
			require.Zero(t, pay.Attempts, "the card is never charged")
			w.requireNothingHeld(t)
		})
	}
}
