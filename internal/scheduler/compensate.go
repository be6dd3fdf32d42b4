package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// undoable reports whether a compensation should undo step r. Processed steps
// with an Undo always are. Explicit compensation (a compensate message) also
// undoes an Error step that was given up on (it may have taken effect before
// its agent went quiet) and retries a CompensationFailed one.
func undoable(r sas.StepRecord, def sas.StepDef, explicit bool) bool {
	if def.Undo == "" {
		return false
	}
	switch r.ProcessState {
	case sas.Processed:
		return true
	case sas.Error:
		return explicit && !refused(r)
	case sas.CompensationFailed:
		return explicit
	}
	return false
}

// refused reports whether an Error step was failed by the holder of its
// attempt, which only an agent's permanent-failure reply does: the remote
// said no, so there is nothing to undo. A step the supervisor gave up on was
// moved to Error by the supervisor, not by the attempt's holder.
func refused(r sas.StepRecord) bool {
	if len(r.History) == 0 {
		return false
	}
	last := r.History[len(r.History)-1]
	if last.To != sas.Error {
		return false
	}
	for _, h := range r.History {
		if h.To == sas.Processing && h.Attempt == last.Attempt && h.Actor == last.Actor {
			return true
		}
	}
	return false
}

// nextUndo is the newest step below step that a running compensation still
// has to undo.
func nextUndo(o order, below int) (sas.StepRecord, bool) {
	for i := below - 1; i >= 0; i-- {
		if r, ok := o.step(i); ok && undoable(r, o.wf.Steps[i], true) {
			return r, true
		}
	}
	return sas.StepRecord{}, false
}

// startCompensation starts undoing an order, newest step first. It is
// idempotent: an undo already running is only re-dispatched while its lease
// runs, and an order with nothing left to undo posts "compensated" again if
// it was compensated. Automatic compensation (after a failed reply) never
// restarts an undo that failed: that is an operator's call.
func (s *Service) startCompensation(ctx context.Context, o order, explicit bool, now time.Time) error {
	ord := o.view.Order
	compensated := false
	for _, r := range o.view.Steps {
		switch r.ProcessState {
		case sas.Compensating:
			if live(r, now) {
				return s.dispatch(ctx, ord, o.wf.Steps[r.Step], r)
			}
			return nil // handed back to the supervisor, which re-drives it
		case sas.CompensationFailed:
			if !explicit {
				return nil
			}
		case sas.Compensated:
			compensated = true
		}
	}
	var cand *sas.StepRecord
	for i := o.n() - 1; i >= 0; i-- {
		if r, ok := o.step(i); ok && undoable(r, o.wf.Steps[i], explicit) {
			cand = &r
			break
		}
	}
	if cand == nil {
		if compensated {
			return s.post(ctx, ord, sas.Status{Status: sas.StatusCompensated, Sequence: SeqCompensated(o.n())}, now)
		}
		s.log.InfoContext(ctx, "nothing to compensate", "order", ord.OrderID)
		return nil
	}
	claimed, err := s.cfg.Store.Claim(ctx, *s.claimParams(o, *cand, cand.ProcessState, now))
	if errors.Is(err, sas.ErrLostRace) {
		// Another delivery started it: that one dispatches the undo.
		s.log.InfoContext(ctx, "compensation already started elsewhere", "order", ord.OrderID, "step", cand.Step, "error", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("claiming the undo of step %s: %w", cand.Key(), err)
	}
	s.log.InfoContext(ctx, "compensation started", "order", ord.OrderID, "step", cand.Step, "explicit", explicit)
	return s.dispatch(ctx, ord, o.wf.Steps[cand.Step], claimed)
}

// Compensate handles a request to undo an order (docs/protocol.md,
// "compensate"): from the supervisor after it gave up on a step, or from an
// operator. The submitter is told of a failed step it may not have heard
// of (the supervisor posts no statuses), then the undo starts.
func (s *Service) Compensate(ctx context.Context, m sas.Compensate) error {
	if !sas.ValidOrderID(m.OrderID) {
		return drop(&sas.ValidationError{Field: "orderId", Reason: "missing or malformed"}, "compensate message")
	}
	o, err := s.load(ctx, m.OrderID)
	if err != nil {
		return err
	}
	now := s.cfg.Clock.Now()
	for _, r := range o.view.Steps {
		if r.ProcessState == sas.Processing || (r.ProcessState == sas.Pending && !r.DueAt.IsZero()) {
			return drop(nil, "cannot compensate order %s: step %d (%s) is %s and could still take effect; compensate it once it has settled",
				m.OrderID, r.Step, o.wf.Steps[r.Step].Name, r.ProcessState)
		}
	}
	s.log.InfoContext(ctx, "compensation requested", "order", m.OrderID, "actor", m.Actor, "reason", m.Reason)
	for _, r := range o.view.Steps {
		if r.ProcessState == sas.Error {
			st := sas.Status{Status: sas.StatusFailed, Step: o.wf.Steps[r.Step].Name, Sequence: SeqFailed(r.Step, r.Attempt), Reason: r.LastError}
			if err := s.post(ctx, o.view.Order, st, now); err != nil {
				return err
			}
		}
	}
	return s.startCompensation(ctx, o, true, now)
}
