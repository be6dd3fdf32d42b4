package sas

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Cancelled is an order's state, never a step's: its submitter or an
// operator cancelled it while it ran, the steps not yet started never
// started, and whatever took effect is undone. A final state, like
// Rejected, that needs no operator (docs/protocol.md, "Cancellation").
const Cancelled ProcessState = "Cancelled"

// KindCancel asks the scheduler to cancel an order: from its submitter on
// the intake queue, or from an operator on the control queue.
const KindCancel Kind = "cancel"

// Status values of a cancellation (docs/intake.md, "Statuses").
const (
	// StatusCancelled: the order was cancelled and what took effect is
	// undone (the final status, in the slot of "compensated").
	StatusCancelled = "cancelled"
	// StatusCancelRefused: a cancel was refused, with the reason: the
	// order had ended, or is not the sender's.
	StatusCancelRefused = "cancel-refused"
)

// Cancel asks for an order to be cancelled (docs/protocol.md,
// "Cancellation"). Who asked is who sent it (the intake's submitter, the
// control queue's sender), never what the message says.
type Cancel struct {
	V       int    `json:"v"`
	Kind    Kind   `json:"kind"`
	OrderID string `json:"orderId"`
	Reason  string `json:"reason,omitempty"`
	// Actor is who the sender says it is: only logged (as Compensate.Actor).
	Actor string `json:"actor,omitempty"`
	// Trace is the order's trace context, a W3C traceparent (trace.go):
	// optional.
	Trace string `json:"trace,omitempty"`
}

// CancelStore is the state store's cancellation write.
type CancelStore interface {
	// Cancel marks the step an order's cancel lands on (CancelTarget),
	// fenced on the state and attempt seen (sas.CancelStep). A step in
	// flight already marked is returned unchanged.
	Cancel(ctx context.Context, p CancelParams) (StepRecord, error)
}

// CancelParams marks the step a cancel lands on: the order's step in
// flight (Processing) or ready to be claimed (Pending), as read.
type CancelParams struct {
	Key     StepKey
	From    ProcessState // Processing or Pending, as the canceller read it
	Attempt int          // the attempt the canceller read
	Now     time.Time
	Actor   string // who asked (the sender), recorded in the history
	Reason  string
}

// Check rejects parameters no record could take.
func (p CancelParams) Check() error {
	switch {
	case p.From != Processing && p.From != Pending:
		return &ValidationError{Field: "from", Reason: fmt.Sprintf("a cancel lands on a Processing or Pending step, not a %s one", p.From)}
	case p.Actor == "":
		return &ValidationError{Field: "actor", Reason: "a cancel records who asked"}
	}
	return nil
}

// markReason starts the reason of a cancel's history entry.
const markReason = "cancel requested by "

// CancelReason is the history entry's reason of a cancel.
func (p CancelParams) CancelReason() string {
	reason := markReason + p.Actor
	if p.Reason != "" {
		reason += ": " + p.Reason
	}
	return BoundReason(reason)
}

// CancelStep is the cancel's transition. A Processing step is marked
// (Cancelled) and left to settle: its holder's completion is refused
// (Complete without CompleteParams.Cancelled), so that the scheduler learns
// of the cancel from the refusal and no successor is claimed; its failure
// or a rescue keeps the mark. A Pending step, which no agent holds, never
// starts: it moves to Error, marked, so the compensation undoes it under
// its key (an earlier attempt may have run before its deadline passed; the
// undo of a key never done is a no-op, docs/protocol.md, "Idempotency
// keys"). Fenced on the state and attempt seen; a Processing step marked
// already is returned unchanged, without a write.
func CancelStep(r StepRecord, p CancelParams) (StepRecord, error) {
	if err := p.Check(); err != nil {
		return r, err
	}
	if r.ProcessState != p.From || r.Attempt != p.Attempt || (p.From == Pending && r.LockedBy != "") {
		return r, race("cancel", r)
	}
	if p.From == Processing {
		if r.Cancelled {
			return r, nil
		}
		r.Cancelled = true
		return move(r, Processing, p.Actor, p.CancelReason(), p.Now), nil
	}
	r = unlease(r)
	r.Cancelled = true
	r.LastError = p.CancelReason()
	r.FailedBy, r.Refused = p.Actor, false
	return move(r, Error, p.Actor, p.CancelReason(), p.Now), nil
}

// isMark reports whether h is a cancel's mark of a step in flight
// (CancelStep from Processing): no transition of state, attempt or holder.
func (h HistoryEntry) isMark() bool {
	return h.From == Processing && h.To == Processing && strings.HasPrefix(h.Reason, markReason)
}

// ErrNotRunning: a cancel of an order that is not running (it ended, or
// failed and waits for an operator) is refused, with the reason.
var ErrNotRunning = errors.New("the order is not running")

// Cancelled reports whether the order was cancelled: a step of it carries
// the cancel's mark.
func (v OrderView) Cancelled() bool {
	for _, r := range v.Steps {
		if r.Cancelled {
			return true
		}
	}
	return false
}

// CancelTargets are the steps a cancel of the order lands on: every step
// in flight (Processing) or ready to be claimed (Pending with a pick-up
// deadline), several when branches run at once (docs/workflows.md,
// "Branches in parallel"), each marked in a write of its own; and, once
// the order is cancelled, its marked steps too, so that a repeated cancel
// repeats its effects and marks what a first one did not reach. An order
// that is not running is refused (ErrNotRunning) with the reason: a
// completed order is not cancelled (an operator's compensate undoes it),
// nor is a failed one (it waits for an operator's resubmit or compensate)
// or one whose undo runs already.
func CancelTargets(v OrderView) ([]StepRecord, error) {
	id := v.Order.OrderID
	if len(v.Steps) == 0 {
		return nil, fmt.Errorf("order %s: %w", id, ErrNotFound)
	}
	var out []StepRecord
	for _, r := range v.Steps {
		if r.InFlight() || r.Cancelled {
			out = append(out, r)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	why := ""
	switch st := v.State(); st {
	case Processed:
		why = "it completed: nothing is running to cancel (an operator's compensate undoes a completed order)"
	case Error:
		why = "a step failed and waits for an operator (resubmit or compensate it)"
	case Compensating:
		why = "its compensation is running already"
	default:
		why = fmt.Sprintf("it ended %s", st)
	}
	return nil, fmt.Errorf("cannot cancel order %s: %s: %w", id, why, ErrNotRunning)
}

// Unmarked are the targets a cancel still has to mark: those in flight
// without the mark.
func Unmarked(targets []StepRecord) []StepRecord {
	var out []StepRecord
	for _, r := range targets {
		if r.InFlight() && !r.Cancelled {
			out = append(out, r)
		}
	}
	return out
}

// cancelSettled reports whether a cancelled order has nothing left to
// run: no step in flight, ready, or being undone.
func (v OrderView) cancelSettled() bool {
	for _, r := range v.Steps {
		switch {
		case r.ProcessState == Processing, r.ProcessState == Compensating:
			return false
		case r.ProcessState == Pending && !r.DueAt.IsZero():
			return false
		}
	}
	return true
}

// InFlight reports whether a forward step could still take effect: held,
// or ready for a scheduler to claim. An order with one is not compensated
// (the scheduler drops the request); it is cancelled.
func (r StepRecord) InFlight() bool {
	return r.ProcessState == Processing || (r.ProcessState == Pending && !r.DueAt.IsZero())
}
