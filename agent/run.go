package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/sas-go/sas/internal/agenthost"
	"github.com/sas-go/sas/internal/httpcall"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sizing"
)

// Status is what the handler would do with a request's run: Outcome.Status.
type Status string

// The statuses of an Outcome.
const (
	// StatusDone: the step succeeded; the scheduler moves on.
	StatusDone Status = "done"
	// StatusFailed: the step failed for good; the scheduler compensates.
	StatusFailed Status = "failed"
	// StatusTransient: the attempt ran and failed (its tries spent, its
	// breaker open, its deadline reached, or a RetryAfter beyond it); the
	// handler replies "transient" and the scheduler's retry policy decides
	// (docs/agents.md, "What an error means").
	StatusTransient Status = "transient"
	// StatusNone: no outcome (a success that came after the deadline); the
	// request is left for redelivery.
	StatusNone Status = ""
)

// Outcome is what the handler would do with a request's run: the reply it
// would send, or none.
type Outcome struct {
	// Status is StatusDone, StatusFailed, StatusTransient or StatusNone.
	Status Status
	// Result is the step's result, encoded (StatusDone).
	Result json.RawMessage
	// Reason is what a failed reply says (StatusFailed).
	Reason string
	// Rejected, with StatusFailed, says the failure is a business
	// rejection (Reject): the order would end Rejected, with no alert.
	Rejected bool
	// RetryAfter is the wait a RetryAfter asked for when it could not be
	// honoured before the deadline: the least wait before the next attempt
	// (StatusTransient).
	RetryAfter time.Duration
	// Err is the error behind a failure or no outcome.
	Err error
}

// DefaultRunDeadline is the time Run gives a request that has no Deadline,
// under a context without one: the deployment's default step timeout.
const DefaultRunDeadline = sizing.DefaultStepTimeout

// Run runs req through a as the handler does, with no queue: the same
// lookup of the step (or its undo), in-process retries, classification of
// errors and deadline, on the wall clock. It is for tests of an agent and
// for local runs; a deployed agent is run by NewHandler or Start.
//
// The deadline is req.Deadline, or the context's if sooner, or
// DefaultRunDeadline from now when neither has one. An outcome that comes
// at or after the deadline is no outcome, as in the handler.
func (a *Agent) Run(ctx context.Context, req Request) Outcome {
	if err := a.Err(); err != nil {
		return Outcome{Status: StatusNone, Err: err}
	}
	deadline := req.Deadline
	if dl, ok := ctx.Deadline(); ok && (deadline.IsZero() || dl.Before(deadline)) {
		deadline = dl
	}
	if deadline.IsZero() {
		deadline = time.Now().Add(DefaultRunDeadline)
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	r := &runner{a: a, clock: systemClock{}, sleep: httpcall.Sleep, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	step := req.StepIndex
	if req.Item != nil {
		step = sas.ElementStep(req.StepIndex, req.Index)
	}
	res, err := r.Run(ctx, sas.AgentRequest{
		OrderID: req.OrderID, Workflow: req.Workflow, Version: req.Version, StepName: req.Step, Step: step, Attempt: req.Attempt,
		IdempotencyKey: req.IdempotencyKey, Payload: req.Payload, Compensation: req.Undo, Action: req.Action,
		Priority: req.Priority, Tries: req.Tries, Agent: a.name, Results: req.Results, Item: req.Item, Token: req.Token,
	})
	var pe *agenthost.PermanentError
	var re *agenthost.RedeliveryError
	switch {
	case err == nil && time.Now().Before(deadline):
		return Outcome{Status: StatusDone, Result: res}
	case err == nil:
		return Outcome{Status: StatusNone, Err: errors.New("the outcome came after the deadline")}
	case errors.As(err, &pe) && time.Now().Before(deadline):
		return Outcome{Status: StatusFailed, Reason: pe.Reason, Rejected: pe.Rejected && !req.Undo, Err: err}
	case errors.As(err, &re):
		return Outcome{Status: StatusTransient, RetryAfter: re.Delay, Err: err}
	case errors.As(err, &pe):
		return Outcome{Status: StatusNone, Err: errors.New("the outcome came after the deadline")}
	}
	return Outcome{Status: StatusTransient, Err: err}
}
