package sastest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/sastest"
	"github.com/sas-go/sas/workflow"
)

// A trip: a flight and a hotel, each with an undo, then the payment.
var tripWorkflow = workflow.Workflow{Name: "trip", Steps: []workflow.Step{
	{Name: "flight", Agent: "airline", Action: "book", Undo: "cancel", Timeout: workflow.Duration(30 * time.Second)},
	{Name: "hotel", Agent: "hotels", Action: "book", Undo: "cancel", Timeout: workflow.Duration(30 * time.Second)},
	{Name: "pay", Agent: "payments", Action: "charge", Timeout: workflow.Duration(20 * time.Second)},
}}

// The agents: Go functions, one per step and one per undo.
func tripAgents() []*agent.Agent {
	book := func(_ context.Context, req agent.Request) (any, error) {
		var p struct {
			Traveller string `json:"traveller"`
		}
		if err := req.DecodePayload(&p); err != nil {
			return nil, err
		}
		return map[string]string{"booking": req.Step + " for " + p.Traveller}, nil
	}
	cancel := func(context.Context, agent.Request) (any, error) { return nil, nil }
	charge := func(_ context.Context, req agent.Request) (any, error) {
		var p struct {
			Amount int `json:"amount"`
		}
		if err := req.DecodePayload(&p); err != nil {
			return nil, err
		}
		if p.Amount > 1000 {
			return nil, agent.Permanent(fmt.Errorf("card declined: %d is over the limit", p.Amount))
		}
		return nil, nil
	}
	return []*agent.Agent{
		agent.New("airline").Step("flight", book, cancel),
		agent.New("hotels").Step("hotel", book, cancel),
		agent.New("payments").Step("pay", charge, nil),
	}
}

// Two orders: one goes through; the other's payment is declined, and what
// was booked is undone, newest first.
func Example() {
	env := sastest.New(t, []workflow.Workflow{tripWorkflow}, tripAgents()...)

	res := env.Run("trip", "order-1", map[string]any{"traveller": "Ada", "amount": 420})
	fmt.Println(res.Status)
	fmt.Println(res.Statuses)

	res = env.Run("trip", "order-2", map[string]any{"traveller": "Bob", "amount": 5000})
	fmt.Println(res.Status, "undone:", res.Undone)
	fmt.Println(res.Statuses)
	pay, _ := res.Step("pay")
	fmt.Println(pay.State, pay.Reason)
	// Output:
	// processed
	// [received step-done/flight step-done/hotel step-done/pay processed]
	// compensated undone: [hotel flight]
	// [received step-done/flight step-done/hotel failed/pay compensated]
	// Error card declined: 5000 is over the limit
}

// A transient failure for the whole first attempt at the hotel: the agent
// tries in process, the request is redelivered and handed back, and the
// supervisor, past the step's deadline and wait limit, retries it. The
// second attempt succeeds; in AWS that is minutes, here milliseconds.
func ExampleEnv_Fail() {
	env := sastest.New(t, []workflow.Workflow{tripWorkflow}, tripAgents()...)
	env.Fail("hotel", 1, errors.New("connection reset"))

	res := env.Run("trip", "order-1", map[string]any{"traveller": "Ada", "amount": 420})
	fmt.Println(res.Status)
	for _, s := range res.Steps {
		fmt.Printf("%s: %s after %d attempts, %d failures\n", s.Name, s.State, s.Attempts, s.Failures)
	}
	fmt.Println("within 10 seconds of virtual time:", res.Took < 10*time.Second)
	// Output:
	// processed
	// flight: Processed after 1 attempts, 0 failures
	// hotel: Processed after 2 attempts, 1 failures
	// pay: Processed after 1 attempts, 0 failures
	// within 10 seconds of virtual time: true
}

// An undo refused for good stops the compensation there and alerts an
// operator.
func ExampleEnv_FailUndo() {
	env := sastest.New(t, []workflow.Workflow{tripWorkflow}, tripAgents()...)
	env.FailUndo("hotel", 1, agent.Permanent(errors.New("cancellations closed")))

	res := env.Run("trip", "order-1", map[string]any{"traveller": "Ada", "amount": 5000})
	fmt.Println(res.Status)
	for _, a := range res.Alerts {
		fmt.Println(a)
	}
	for _, c := range res.Calls {
		fmt.Println(c)
	}
	// Output:
	// compensation-failed
	// pay: Error: card declined: 5000 is over the limit
	// hotel: CompensationFailed: cancellations closed
	// flight#1
	// hotel#1
	// pay#1 → card declined: 5000 is over the limit
	// hotel#1 undo → cancellations closed
}

// t stands in for the *testing.T of a test function, which examples do not
// have: it panics where a test would fail.
var t testing.TB = exampleT{}

type exampleT struct{ testing.TB }

func (exampleT) Helper()                           {}
func (exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (exampleT) Cleanup(func())                    {}
