package sastest

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// Status is how an order ended: Result.Status.
type Status string

// How an order ended.
const (
	// StatusProcessed: every step succeeded.
	StatusProcessed Status = "processed"
	// StatusCompensated: a step failed for good, and every step done
	// before it that has an undo was undone.
	StatusCompensated Status = "compensated"
	// StatusFailed: a step failed for good, with nothing to undo (it was
	// the first, or the steps before it have no undo).
	StatusFailed Status = "failed"
	// StatusCompensationFailed: an undo failed for good, or the supervisor
	// gave up on it; an operator was alerted.
	StatusCompensationFailed Status = "compensation-failed"
	// StatusRejected: a step was refused as a business outcome
	// (agent.Reject, or a status the HTTP agent's RejectStatuses lists),
	// and whatever took effect was undone; no operator was alerted.
	StatusRejected Status = "rejected"
)

// State is where a step ended: Step.State, the state of its record in the
// store (docs/pattern.md §2).
type State string

// Where a step ended.
const (
	StateProcessed          = State(sas.Processed)
	StateError              = State(sas.Error)
	StateCompensated        = State(sas.Compensated)
	StateCompensationFailed = State(sas.CompensationFailed)
	// StatePending: a step never started, because an earlier one failed.
	StatePending = State(sas.Pending)
	// StateSkipped: the step's condition (workflow.Step.When) was false, so
	// it was never called and has nothing to undo; Step.Reason names the
	// condition.
	StateSkipped = State(sas.Skipped)
)

// Result is how an order ended.
type Result struct {
	OrderID string
	// Status is StatusProcessed, StatusCompensated, StatusFailed,
	// StatusCompensationFailed, StatusRejected or StatusCancelled.
	Status Status
	// Results are what the steps returned, by step name, as the scheduler
	// recorded them (compacted JSON; a step that returned nothing has no
	// entry): what the steps after each saw (agent.Request.DecodeResult).
	// See Result.Decode.
	Results map[string]json.RawMessage
	// Steps are the order's steps, in workflow order.
	Steps []Step
	// Undone are the names of the steps that were undone, in the order
	// their undo succeeded: newest first. A fan-out's elements are undone
	// each on its own, named "reserve[3]": highest index first.
	Undone []string
	// Statuses are what the order's replyTo queue received, in sequence
	// order: "received", "step-done/flight", "failed/hotel",
	// "compensated", ... (the status, and "/" and the step when it names
	// one; docs/intake.md, "Statuses").
	Statuses []string
	// Alerts are what an operator was told about the order, each
	// "<step>: <state>: <reason>".
	Alerts []string
	// Calls are the runs of the agents' Funcs for the order, in order:
	// every run, in-process tries and redeliveries included.
	Calls []Call
	// Took is the virtual time from submission to settling.
	Took time.Duration
	// History is every transition of the order's steps, oldest first, as
	// "<step> <from>→<to> #<attempt> by <actor>: <reason>" (a wait of the
	// supervisor's is "<step> Processing→Processing ..."): what sasctl show
	// prints, to check who counted what.
	History []string
}

// Step is where one step of an order ended.
type Step struct {
	Name string
	// State is the step's final state: StateProcessed, StateError,
	// StateCompensated, StateCompensationFailed, StatePending or
	// StateSkipped.
	State State
	// Attempts counts the scheduler's attempts at the step that reached
	// its agent (its undo's not included).
	Attempts int
	// Failures counts the times the supervisor found the step stuck.
	Failures int
	// Reason is the step's last error: a refusal's reason, why the
	// supervisor gave it up, or why its condition could not be evaluated;
	// for a skipped step, why it was skipped.
	Reason string
	// Rejected is true when the step's failure was a business rejection.
	Rejected bool
	// Result is what the step returned, as recorded (nil for none); a
	// fan-out step's is the list of its elements' results, in order.
	Result json.RawMessage
	// Elements are a fan-out step's elements that started, in index order
	// (nil for a step that is not a fan-out): an element not started, its
	// fan-out stopped first, has none.
	Elements []Element
}

// Element is where one element of a fan-out step ended (docs/workflows.md,
// "Fan-out over a list").
type Element struct {
	// Index is the element's position in the list, from 0.
	Index int
	// Item is the element, as the agent got it (agent.Request.Item).
	Item json.RawMessage
	// State is the element's final state: StateProcessed, StateError,
	// StateCompensated (its undo ran) or StateCompensationFailed.
	State State
	// Attempts counts the attempts at the element that reached its agent.
	Attempts int
	// Reason is the element's last error.
	Reason string
	// Result is what the element returned (nil for none).
	Result json.RawMessage
}

// Call is one run of an agent's Func for a step of an order.
type Call struct {
	Step string
	// Attempt is the scheduler's attempt, from 1, counted apart for the
	// step and for its undo: what Fail and FailUndo name.
	Attempt int
	// Undo is true for a run of the step's undo.
	Undo bool
	// Err is the error the run returned (injected or the Func's), "" for
	// a success.
	Err string
	// Item is the element of a fan-out step's list the run was for, and
	// Index its position from 0 (agent.Request.Item and Index); nil for a
	// step that is not a fan-out. An element's attempts are counted apart.
	Item  json.RawMessage
	Index int
}

// String is "flight#1", "flight#2 undo", "reserve[3]#1" for a fan-out's
// element, with the error after a "→".
func (c Call) String() string {
	s := fmt.Sprintf("%s#%d", c.Step, c.Attempt)
	if c.Item != nil {
		s = fmt.Sprintf("%s[%d]#%d", c.Step, c.Index, c.Attempt)
	}
	if c.Undo {
		s += " undo"
	}
	if c.Err != "" {
		s += " → " + c.Err
	}
	return s
}

// Step returns the step of that name, and false when the order has none.
func (r Result) Step(name string) (Step, bool) {
	i := slices.IndexFunc(r.Steps, func(s Step) bool { return s.Name == name })
	if i < 0 {
		return Step{}, false
	}
	return r.Steps[i], true
}

// Decode decodes the result of the step named step into v: what the
// order's step returned (its Func's result, or the service's answer for the
// HTTP agent). A step that recorded none is an error.
func (r Result) Decode(step string, v any) error {
	res, ok := r.Results[step]
	if !ok {
		return fmt.Errorf("sastest: order %s: step %q recorded no result", r.OrderID, step)
	}
	return json.Unmarshal(res, v)
}

// result reads how order v ended.
func (e *Env) result(v sas.OrderView, statuses []sas.Status, took time.Duration) Result {
	e.t.Helper()
	id := v.Order.OrderID
	res := Result{OrderID: id, Took: took}
	switch st := v.State(); st {
	case sas.Processed:
		res.Status = StatusProcessed
	case sas.Compensated:
		res.Status = StatusCompensated
	case sas.Error:
		res.Status = StatusFailed
	case sas.CompensationFailed:
		res.Status = StatusCompensationFailed
	case sas.Rejected:
		res.Status = StatusRejected
	case sas.Cancelled:
		res.Status = StatusCancelled
	default:
		e.t.Fatalf("sastest: order %s is stuck (%s): nothing is left to deliver and no step is due, but it did not end: %s", id, st, describe(v))
	}

	e.mu.Lock()
	for _, c := range e.calls {
		if c.order == id {
			res.Calls = append(res.Calls, c.Call)
		}
	}
	state := map[string]sas.ProcessState{}
	for i, r := range v.Steps {
		name := r.StepName
		if name == "" && i < len(v.Order.Steps) {
			name = v.Order.Steps[i]
		}
		state[name] = r.ProcessState
		reason := r.LastError
		if r.ProcessState == sas.Skipped {
			reason = r.LastHistoryReason()
		}
		res.Steps = append(res.Steps, Step{
			Name: name, State: State(r.ProcessState), Failures: r.FailureCount, Reason: reason,
			Attempts: len(e.attempts[attemptKey{order: id, step: name}]), Rejected: r.Rejected, Result: r.Result,
		})
		if v.IsFanOut(r) {
			res.Steps[len(res.Steps)-1].Elements = e.elements(v, r, name, state)
		}
		if len(r.Result) > 0 {
			if res.Results == nil {
				res.Results = map[string]json.RawMessage{}
			}
			res.Results[name] = r.Result
		}
	}
	e.mu.Unlock()

	for _, h := range sas.MergeHistory(v.Steps) {
		name := ""
		if h.Step < len(v.Order.Steps) {
			name = v.Order.Steps[h.Step]
		}
		res.History = append(res.History, fmt.Sprintf("%s %s→%s #%d by %s: %s", name, h.From, h.To, h.Attempt, h.Actor, h.Reason))
	}
	for _, c := range res.Calls {
		name := c.Step
		if c.Item != nil {
			name = fmt.Sprintf("%s[%d]", c.Step, c.Index) // an element: its state is under that name
		}
		if c.Undo && c.Err == "" && state[name] == sas.Compensated && !slices.Contains(res.Undone, name) {
			res.Undone = append(res.Undone, name)
		}
	}
	for _, s := range statuses {
		if s.Step != "" {
			res.Statuses = append(res.Statuses, s.Status+"/"+s.Step)
		} else {
			res.Statuses = append(res.Statuses, s.Status)
		}
	}
	seen := map[string]bool{}
	for _, a := range e.alert.Alerts() {
		if a.OrderID != id {
			continue
		}
		text := fmt.Sprintf("%s: %s: %s", a.StepName, a.State, a.Reason)
		if key := a.ID + "|" + text; !seen[key] { // a re-sent alert is the same alert
			seen[key] = true
			res.Alerts = append(res.Alerts, text)
		}
	}
	return res
}

// elements reads fan-out step r's elements (named step in the order's
// view), and notes each one's state in state as "step[index]". Called with
// e.mu held.
func (e *Env) elements(v sas.OrderView, r sas.StepRecord, step string, state map[string]sas.ProcessState) []Element {
	recs, err := sas.AllElements(e.ctx, e.store, r.Key())
	if err != nil {
		e.t.Fatalf("sastest: %v", err)
	}
	out := make([]Element, 0, len(recs))
	for _, x := range recs {
		_, i := sas.ElementOf(x.Step)
		state[fmt.Sprintf("%s[%d]", step, i)] = x.ProcessState
		out = append(out, Element{Index: i, Item: x.Item, State: State(x.ProcessState), Reason: x.LastError, Result: x.Result,
			Attempts: len(e.attempts[attemptKey{order: v.Order.OrderID, step: step, element: i + 1}])})
	}
	return out
}
