package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// Request is one step of one order that the scheduler asks of an agent.
type Request struct {
	// OrderID names the order.
	OrderID string
	// Workflow is the order's workflow; empty from an older scheduler.
	Workflow string
	// Version is the version of Workflow's definition the order runs on
	// (orders keep the definition they were submitted with across deploys);
	// empty from an older scheduler.
	Version string
	// Step is the step's name in the workflow ("reserve-flight"): the name
	// a Func is registered under with Agent.Step.
	Step string
	// StepIndex is the step's position in the workflow, from 0.
	StepIndex int
	// Attempt counts the scheduler's attempts at this step, from 1. It is
	// for logs: every attempt of a step carries the same IdempotencyKey,
	// and the work must not depend on the attempt.
	Attempt int
	// IdempotencyKey is the same on every delivery, retry and attempt of
	// this step of this order ("o-1:1"; "o-1:1:undo" for its undo). Send it
	// with every effect the step has, and have the service do the effect at
	// most once per key (see the package documentation).
	IdempotencyKey string
	// Payload is the order's payload, a JSON object (or empty). See
	// DecodePayload.
	Payload json.RawMessage
	// Undo is true for a compensation: the Func running is the step's undo,
	// asked because a later step failed for good.
	Undo bool
	// Action is the step's action from the workflow definition the order
	// runs on (its undo text when Undo is set), such as "POST /payments".
	// An agent may ignore it; the HTTP agent calls it. Empty from an older
	// scheduler, and for a step whose definition gives none.
	Action string
	// Priority is the order's priority, 0 to 9, higher first.
	Priority int
	// Deadline is when this run of the step must be over: the step's time
	// limit counted from when the agent started the request (or the Lambda
	// invocation's end, less a reserve for the replies, if that is sooner).
	// The Func's context ends then; an outcome after it is not reported.
	Deadline time.Time
	// Tries is how many times the agent may run the step's Func for this
	// attempt (the step's retry.attempts in its workflow definition); 0:
	// the agent's own (Tries, DefaultTries). An HTTPClient's tries of one
	// call are the client's own (HTTPConfig).
	Tries int

	// Results are what the steps before this one returned, by step name
	// (in an undo, its own step's result too): each step's Func result as
	// the scheduler recorded it, compacted JSON. A step that returned
	// nothing has no entry. See DecodeResult.
	Results map[string]json.RawMessage

	// Item, in a fan-out step (docs/workflows.md, "Fan-out over a list"),
	// is the element of the step's list this request runs the step for, as
	// JSON; nil in every other step. Each element is a request of its own,
	// with its own IdempotencyKey (the step's and ":i<Index>") and its own
	// undo, which sees its element and its own result. See DecodeItem.
	Item json.RawMessage
	// Index is Item's position in the list, from 0; 0 when Item is nil.
	Index int

	// Token, for a step that waits for the outside world after its agent
	// starts the work (a callback step with an agent: docs/agents.md,
	// "Steps that hand out a token"), is the step's completion token. Hand
	// it to the service that does the work: its completion with it
	// (package completion, a complete message) completes the step, with
	// its result; the Func's own result does not. Each attempt has a token
	// of its own, and only the newest completes the step. Empty for every
	// other step, and for an undo.
	Token string

	// nonRetryable: the names of the errors the step's retry policy does
	// not retry (agent.Named).
	nonRetryable []string
	// clock is the agent's (HandlerConfig.Clock): see Now.
	clock Clock
}

// Now is the time by the agent's clock (HandlerConfig.Clock): the wall
// clock when deployed, the test kit's virtual clock under sastest, so that
// a step that reads the time (a reminder that says how long ago, a deadline
// it computes) sees the time its test set (docs/agents.md, "Testing").
// Read it instead of time.Now in a step.
func (r Request) Now() time.Time {
	if r.clock == nil {
		return time.Now()
	}
	return r.clock.Now()
}

// DecodeResult decodes the result of the step named step into v (with
// encoding/json): what that step's Func returned, recorded when it
// completed (docs/workflows.md, "Results"). A step sees the results of the
// steps it follows (every step before it in a straight line; its
// ancestors in a workflow with branches), and an undo its own step's too,
// so a cancellation can name the booking its step made:
//
//	var booking struct{ ID string `json:"bookingId"` }
//	if err := req.DecodeResult("reserve-flight", &booking); err != nil {
//		return nil, err
//	}
//
// A result that is absent (the step returned nothing, or is not one this
// step follows) or does not decode into v is a permanent failure naming the
// step, since running again cannot change what was recorded; a step whose
// result is optional checks HasResult first.
func (r Request) DecodeResult(step string, v any) error {
	res, ok := r.Results[step]
	if !ok {
		return Permanent(fmt.Errorf("order %s, step %s: no result of step %q (results: %s)", r.OrderID, r.Step, step, r.resultNames()))
	}
	if err := json.Unmarshal(res, v); err != nil {
		return Permanent(fmt.Errorf("order %s, step %s: reading the result of step %q: %w", r.OrderID, r.Step, step, err))
	}
	return nil
}

// HasResult reports whether the request carries a result of the step
// named step.
func (r Request) HasResult(step string) bool {
	_, ok := r.Results[step]
	return ok
}

func (r Request) resultNames() string {
	if len(r.Results) == 0 {
		return "none"
	}
	names := make([]string, 0, len(r.Results))
	for n := range r.Results {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// DecodePayload decodes the payload into v (with encoding/json). A payload
// that does not decode never will: the error is permanent (see Permanent),
// so a step can return it as it is.
func (r Request) DecodePayload(v any) error {
	p := r.Payload
	if len(p) == 0 {
		p = json.RawMessage("null")
	}
	if err := json.Unmarshal(p, v); err != nil {
		return Permanent(fmt.Errorf("order %s, step %s: reading the payload: %w", r.OrderID, r.Step, err))
	}
	return nil
}

// DecodeItem decodes the element a fan-out step runs for (Item) into v
// (with encoding/json):
//
//	var line struct{ SKU string `json:"sku"`; Qty int `json:"qty"` }
//	if err := req.DecodeItem(&line); err != nil {
//		return nil, err
//	}
//
// A request with no element (the step is no fan-out), or an element that
// does not decode into v, is a permanent failure naming the step, since
// running again cannot change it.
func (r Request) DecodeItem(v any) error {
	if r.Item == nil {
		return Permanent(fmt.Errorf("order %s, step %s: no element: the step is not a fan-out (forEach)", r.OrderID, r.Step))
	}
	if err := json.Unmarshal(r.Item, v); err != nil {
		return Permanent(fmt.Errorf("order %s, step %s: reading element %d: %w", r.OrderID, r.Step, r.Index, err))
	}
	return nil
}

// Func runs one step (or its undo) for one order and returns its result.
//
// The result is reported to the scheduler, which records it with the step
// and hands it to the steps that follow and to the step's own undo
// (Request.DecodeResult). Return nil for no result, a json.RawMessage to
// pass JSON through as it is, or any value encoding/json can encode. A
// result is at most 16 KiB of compacted JSON, and an order's results at
// most 64 KiB together (docs/workflows.md, "Results"): a step whose result
// is larger fails, named "ResultTooLarge", and since its effect has
// happened, its undo runs with the order's compensation. A result that
// cannot be encoded is logged and left out; the step still counts as done,
// since its effect has happened.
//
// The error decides what happens next (see Permanent and RetryAfter; any
// other error is transient). The context ends at req.Deadline.
//
// A Func may run more than once for the same IdempotencyKey, at the same
// time even (SQS delivers a message at least once), and its undo may run
// before it: see the package documentation.
type Func func(ctx context.Context, req Request) (result any, err error)

// requestOf is the SDK's view of a decoded agent.request, run until
// deadline.
func requestOf(r sas.AgentRequest, deadline time.Time) Request {
	step, index := r.Step, 0
	if sas.IsElement(r.Step) {
		step, index = sas.ElementOf(r.Step)
	}
	return Request{
		OrderID: r.OrderID, Workflow: r.Workflow, Version: r.Version, Step: r.StepName, StepIndex: step, Attempt: r.Attempt,
		IdempotencyKey: r.IdempotencyKey, Payload: r.Payload, Undo: r.Compensation, Action: r.Action,
		Priority: r.Priority, Deadline: deadline, Tries: r.Tries, nonRetryable: r.NonRetryable,
		Results: r.Results, Item: r.Item, Index: index, Token: r.Token,
	}
}
