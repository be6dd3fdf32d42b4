// Package trip is the example's workflow: book a trip by holding a seat on
// a flight, a hotel room and a rental car, then charging the traveller's
// card. When a step is refused, what was done before it is undone, newest
// first: a declined card releases the car, then the room, then the seat.
//
// The same definition is written out as ../workflows.json, for a
// deployment that takes a workflow file; a test keeps the two in step.
package trip

import (
	"time"

	"github.com/sas-go/sas/workflow"
)

// The workflow's name, what an order's "workflow" field names.
const Name = "trip"

// The agents the steps go to: the travel agency's (flights, hotels, cars)
// and the payments agent's.
const (
	TravelAgent   = "travel"
	PaymentsAgent = "payments"
)

// The steps, in order.
const (
	Flight = "flight"
	Hotel  = "hotel"
	Car    = "car"
	Pay    = "pay"
)

// Payload is an order's payload: what each step reads.
type Payload struct {
	Traveller string `json:"traveller"`
	// Flight, Hotel and Car name what to hold: a flight number, a hotel,
	// a car class.
	Flight string `json:"flight"`
	Hotel  string `json:"hotel"`
	Car    string `json:"car"`
	// Amount is what the card is charged, in euros.
	Amount int `json:"amount"`
}

// Workflow is the trip workflow.
func Workflow() workflow.Workflow {
	d := func(v time.Duration) workflow.Duration { return workflow.Duration(v) }
	return workflow.Workflow{Name: Name, Steps: []workflow.Step{
		{Name: Flight, Agent: TravelAgent, Action: "hold a seat", Undo: "release the seat", Timeout: d(30 * time.Second)},
		{Name: Hotel, Agent: TravelAgent, Action: "hold a room", Undo: "release the room", Timeout: d(30 * time.Second)},
		{Name: Car, Agent: TravelAgent, Action: "hold a car", Undo: "release the car", Timeout: d(30 * time.Second)},
		// The card is charged last, so nothing after it can fail: its
		// refund runs only when an operator compensates a booked trip.
		{Name: Pay, Agent: PaymentsAgent, Action: "charge the card", Undo: "refund", Timeout: d(20 * time.Second),
			Retry: &workflow.Retry{FailureThreshold: 5, Backoff: &workflow.Backoff{Base: d(2 * time.Second), Max: d(time.Minute)}}},
	}}
}

// ParallelName names the trip whose holds run at once.
const ParallelName = "trip-parallel"

// Parallel is the trip with its three holds at once: flight, hotel and car
// start with the order (hotel and car follow no step), and the card is
// charged once all three are held, with every booking id in its request
// (docs/workflows.md, "Branches in parallel"). When a hold is refused,
// nothing new starts, the holds still running finish, and every hold made
// is released, newest first. Its steps are the trip's, with the same
// limits.
func Parallel() workflow.Workflow {
	w := Workflow()
	w.Name = ParallelName
	w.Steps[1].After = []string{}                   // hotel: with the order
	w.Steps[2].After = []string{}                   // car: with the order
	w.Steps[3].After = []string{Flight, Hotel, Car} // pay: once all three are held
	return w
}

// ApprovalName names the trip a manager approves.
const ApprovalName = "trip-approval"

// Approve is the approval step's name: a callback step, completed from
// outside with the token its waiting status hands out.
const Approve = "approve"

// ApprovalTimeout is how long a manager has to approve a trip by default.
const ApprovalTimeout = 24 * time.Hour

// Approval is the trip a manager approves before the card is charged: the
// seat, the room and the car are held, then the trip waits for a person (a callback step: the
// token goes out in the order's waiting status and an alert; the manager
// completes it with sasctl, the console's Waiting page or package
// completion), then the card is charged. Rejected, or not approved within
// timeout, the holds are released (docs/workflows.md, "Callback steps").
func Approval(timeout time.Duration) workflow.Workflow {
	w := Workflow()
	return workflow.Workflow{Name: ApprovalName, Steps: []workflow.Step{
		w.Steps[0], w.Steps[1], w.Steps[2],
		{Name: Approve, Callback: &workflow.Callback{Timeout: workflow.Duration(timeout)}},
		w.Steps[3],
	}}
}

// Workflows are the example deployment's workflows: the trip, its holds
// one after the other, the same trip with its holds at once, and the trip
// a manager approves within ApprovalTimeout.
func Workflows() []workflow.Workflow { return WorkflowsApprovedWithin(ApprovalTimeout) }

// WorkflowsApprovedWithin are Workflows with another approval timeout (the
// deploy-and-run test's, short enough to see one pass).
func WorkflowsApprovedWithin(timeout time.Duration) []workflow.Workflow {
	return []workflow.Workflow{Workflow(), Parallel(), Approval(timeout)}
}
