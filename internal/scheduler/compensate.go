package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sas-go/sas/internal/metrics"
	"github.com/sas-go/sas/internal/msgctx"
	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
)

// undoable reports whether a compensation should undo step r. Processed
// steps with an Undo always are, and so is every step in Error: one the
// supervisor gave up on may have taken effect before its agent went quiet,
// one whose success arrived late owes its undo (UndoOwed), and even one the
// remote refused may have taken effect under a duplicate delivery whose
// reply was lost (docs/protocol.md, "A refusal is not proof of no
// effect"); the undo of a key never done is a no-op. Explicit compensation
// (a compensate message) also retries a CompensationFailed step.
func undoable(r sas.StepRecord, def sas.StepDef, explicit bool) bool {
	if def.Undo == "" {
		return false
	}
	switch r.ProcessState {
	case sas.Processed:
		return true
	case sas.Error:
		// A step whose condition could not be evaluated was never called
		// (choice.go): nothing to undo, unless an effect was noted.
		return r.FailedBy != sas.ByCondition || r.UndoOwed
	case sas.CompensationFailed:
		return explicit
	}
	return false
}

// nextUndo is the newest step other than except that a running compensation
// still has to undo. Undos run newest first; a step whose effect was noted
// late (UndoOwed) is taken whenever it is found, even above the undos done.
func nextUndo(o order, except int) (sas.StepRecord, bool) {
	for _, i := range undoOrder(o) {
		if r, ok := o.step(i); ok && i != except && undoable(r, o.wf.Steps[i], true) {
			return r, true
		}
	}
	return sas.StepRecord{}, false
}

// inFlight reports whether a forward step could still take effect: held,
// or ready for a scheduler to claim.
func inFlight(r sas.StepRecord) bool { return r.InFlight() }

// startCompensation starts undoing an order, newest step first. It is
// idempotent: an undo already running is only re-dispatched while its lease
// runs, and an order with nothing left to undo posts "compensated" again if
// it was compensated. Automatic compensation (after a failed reply) never
// restarts an undo that failed: that is an operator's call. It returns the
// key of the step whose undo it claimed, if it claimed one.
func (s *Service) startCompensation(ctx context.Context, u *outbox.Unit, o order, explicit bool, now time.Time) (sas.StepKey, error) {
	for tries := 1; ; tries++ {
		k, err := s.compensateFrom(ctx, u, o, explicit, now)
		var moved *siblingMoved
		if !errors.As(err, &moved) || tries == 3 {
			return k, err
		}
		// The undo's claim is fenced on the order as read: a step moved
		// since (an operator's resubmit, most likely), so the plan is made
		// again from the order as it is now.
		s.log.InfoContext(ctx, "the order changed while its compensation was planned; planning again", "order", o.id(),
			"step", moved.Current.Step, "state", moved.Current.ProcessState)
		if err := s.read(ctx, &o); err != nil {
			return sas.StepKey{}, err
		}
	}
}

// callsForCompensation reports whether the order, as read, still calls for
// an automatic compensation: a forward step of it failed (Error) or its
// undo has begun (Compensating, Compensated). An order whose failed step
// was resubmitted, and has run on or completed since, does not
// (docs/protocol.md, "A resubmit against a compensation"). An undo claim
// carries every other step as read (claimUndo), and the claimed step is
// fenced on its own state, so the state that called for the claim is
// checked in the claim's own write.
func callsForCompensation(o order) bool {
	for _, r := range o.steps {
		switch r.ProcessState {
		case sas.Error, sas.Compensating, sas.Compensated:
			return true
		}
		if r.Cancelled {
			return true // cancelled: what took effect is undone (cancel.go)
		}
	}
	return false
}

// siblingMoved is an undo claim that lost because another step of the
// order is no longer in the state the plan read.
type siblingMoved struct{ *sas.RaceError }

// compensateFrom is one plan of startCompensation, from the order as read.
func (s *Service) compensateFrom(ctx context.Context, u *outbox.Unit, o order, explicit bool, now time.Time) (sas.StepKey, error) {
	ord := o.ord
	if !explicit && !callsForCompensation(o) {
		// The failure that asked for this compensation no longer stands
		// (the refused or given-up step was resubmitted, and completed,
		// since it was read): nothing is undone. The claim below is fenced
		// on the order as read, so this holds in the same write (issue 29,
		// N2).
		s.log.InfoContext(ctx, "not compensating: no step of the order calls for it any more", "order", ord.OrderID)
		return sas.StepKey{}, nil
	}
	compensated := false
	for _, r := range o.steps {
		if explicit && inFlight(r) {
			// An operator's compensate is refused while a step could still
			// take effect (compensate checks it on its first read). Here a
			// plan made again after its claim lost (startCompensation)
			// finds one: an operator's resubmit landed between the read and
			// the claim. The resubmit wins, as its own fence makes it win
			// when it comes second (docs/protocol.md, "A resubmit against a
			// compensation"); claimed, the undo would run beside the
			// resubmitted step's claim (the simulator's seed 5890).
			return sas.StepKey{}, drop(nil, "cannot compensate order %s: step %d (%s) is %s again (resubmitted meanwhile) and could still take effect; compensate it once it has settled",
				ord.OrderID, r.Step, o.wf.Steps[r.Step].Name, r.ProcessState)
		}
		if inFlight(r) && r.ProcessState == sas.Processing && r.ForEachCount > 0 && !r.Cancelled {
			// A fan-out running beside the failure (a branch of a graph):
			// its window stops as after an element's failure, and its
			// elements in flight settle; its own failure plans again
			// (fanoutstop.go).
			return sas.StepKey{}, s.stopFanOut(ctx, u, o, r.Key(), "stopped: another step of the order failed", false, now)
		}
		if inFlight(r) {
			// An operator resubmitted a failed step since the failure that
			// asked for this compensation: the order runs on, and that
			// failure no longer stands (as an explicit compensate, an
			// automatic one never undoes an order with a step in flight).
			s.log.InfoContext(ctx, "not compensating: a step is in flight again", "order", ord.OrderID, "step", r.Step, "state", r.ProcessState)
			return sas.StepKey{}, nil
		}
		switch r.ProcessState {
		case sas.Compensating:
			if s.resend(ctx, r, now) {
				s.dispatch(ctx, u, o, o.wf.Steps[r.Step], r)
			}
			return sas.StepKey{}, nil // running, queued, or handed back to the supervisor, which re-drives it
		case sas.CompensationFailed:
			if !explicit {
				return sas.StepKey{}, nil
			}
		case sas.Compensated:
			compensated = true
		}
	}
	if held, err := s.fanOutHeld(ctx, o); err != nil || held != nil {
		// A stopped fan-out's elements in flight settle before anything is
		// undone; the last to settle starts this again (fanoutstop.go).
		if err == nil && explicit {
			err = drop(nil, "cannot compensate order %s: element %d of step %d is in flight and could still take effect; compensate it once it has settled",
				ord.OrderID, held.Step, sas.StepOf(held.Step))
		}
		return sas.StepKey{}, err
	}
	var cand *sas.StepRecord
	for _, i := range undoOrder(o) {
		if r, ok := o.step(i); ok && undoable(r, o.wf.Steps[i], explicit) {
			cand = &r
			break
		}
	}
	if cand == nil {
		if end := ending(o); compensated || end.Status == sas.StatusRejected || end.Status == sas.StatusCancelled {
			s.post(ctx, u, ord, end, now)
			return sas.StepKey{}, nil
		}
		s.log.InfoContext(ctx, "nothing to compensate", "order", ord.OrderID)
		return sas.StepKey{}, nil
	}
	claimed, err := s.claimUndo(ctx, u, o, *cand, !explicit, now)
	if err != nil || !claimed {
		return sas.StepKey{}, err
	}
	s.emitOrder(ctx, metrics.CompensationsStarted, ord.OrderID, ord.Workflow, now)
	return cand.Key(), nil
}

// claimUndo claims the undo of step r and dispatches it, after delivering
// what its failure may still owe (tellBeforeClaim). It reports whether the
// claim is this delivery's.
func (s *Service) claimUndo(ctx context.Context, u *outbox.Unit, o order, r sas.StepRecord, tell bool, now time.Time) (bool, error) {
	if err := s.tellBeforeClaim(ctx, o, r, tell, now); err != nil {
		return false, err
	}
	if err := s.tellConditionFailures(ctx, o, now); err != nil {
		return false, err
	}
	cp := *s.claimParams(o, r, r.ProcessState, now)
	cp.RequestedBy, cp.Why = requesterOf(ctx)
	// Fenced on the order's other steps as read (docs/protocol.md, "A
	// resubmit against a compensation").
	for _, sib := range o.steps {
		if sib.Step != r.Step {
			cp.Siblings = append(cp.Siblings, sas.SeenOf(sib))
		}
	}
	claimed, err := s.cfg.Store.Claim(ctx, cp)
	if own, ok := sas.OwnClaim(err, cp); ok {
		// Our claim committed and its retry lost to it: it is ours to send.
		claimed, err = own, nil
	}
	if re := (*sas.RaceError)(nil); errors.As(err, &re) && re.Key != r.Key() && re.Current != nil {
		return false, &siblingMoved{re}
	}
	if errors.Is(err, sas.ErrLostRace) {
		// Another delivery started it: that one dispatches the undo. But
		// if this is a redelivery, the other may be an earlier delivery of
		// this very message, whose send can fail after this one's
		// acknowledgement deleted the message: the redelivery sends it
		// again while no pick-up was reported (resend).
		s.log.InfoContext(ctx, "compensation already started elsewhere", "order", o.id(), "step", r.Step, "err", err)
		if re := (*sas.RaceError)(nil); errors.As(err, &re) && re.Current != nil && re.Current.ProcessState == sas.Compensating &&
			re.Current.Attempt > r.Attempt && s.resend(ctx, *re.Current, now) {
			s.dispatch(ctx, u, o, o.wf.Steps[r.Step], *re.Current)
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claiming the undo of step %s: %w", r.Key(), err)
	}
	s.log.InfoContext(ctx, "undo claimed", "order", o.id(), "step", r.Step)
	s.dispatch(ctx, u, o, o.wf.Steps[r.Step], claimed)
	return true, nil
}

// Compensate handles a request to undo an order (docs/protocol.md,
// "compensate"): from the supervisor after it gave up on a step, or from an
// operator. The submitter is told of a failed step it may not have heard
// of (the supervisor posts no statuses), then the undo starts.
func (s *Service) Compensate(ctx context.Context, m sas.Compensate) error {
	return s.run(ctx, func(u *outbox.Unit) error { return s.compensate(ctx, u, m) })
}

func (s *Service) compensate(ctx context.Context, u *outbox.Unit, m sas.Compensate) error {
	if !sas.ValidOrderID(m.OrderID) {
		return drop(&sas.ValidationError{Field: "orderId", Reason: "missing or malformed"}, "compensate message")
	}
	o, err := s.load(ctx, m.OrderID)
	if err != nil {
		return err
	}
	o.ord.Trace = sas.OrderTrace(o.ord.Trace, m.Trace)
	ctx = msgctx.WithTrace(ctx, o.ord.Trace)
	now := s.cfg.Clock.Now()
	// A give-up's compensate (the supervisor's) is automatic: it undoes
	// only while the order still calls for it, checked in the claim's own
	// write. A redelivery that arrives after an operator resubmitted the
	// step, and it completed, undoes nothing (issue 29, N2; the
	// simulator's seed 8401).
	explicit := m.GivenUp == nil
	if !explicit && sas.IsElement(m.GivenUp.Step) {
		return s.elementGivenUp(ctx, u, o, *m.GivenUp, now) // fanoutstop.go
	}
	for _, r := range o.steps {
		if inFlight(r) {
			if !explicit {
				s.log.InfoContext(ctx, "not compensating: the give-up this compensate was sent for no longer stands", "order", m.OrderID,
					"step", r.Step, "state", r.ProcessState, "givenUpStep", m.GivenUp.Step, "givenUpAttempt", m.GivenUp.Attempt)
				return nil
			}
			return drop(nil, "cannot compensate order %s: step %d (%s) is %s and could still take effect; compensate it once it has settled",
				m.OrderID, r.Step, o.wf.Steps[r.Step].Name, r.ProcessState)
		}
	}
	s.log.InfoContext(ctx, "compensation requested", "order", m.OrderID, "actor", m.Actor, "reason", m.Reason)
	ctx = withRequester(ctx, m.Actor, m.Reason) // recorded by the undo's claim (claimUndo)
	for _, r := range o.steps {
		if r.ProcessState == sas.Error {
			// Told before the undo is claimed: after the claim, a
			// redelivery no longer finds the step failed.
			st := sas.Status{Status: sas.StatusFailed, Step: o.wf.Steps[r.Step].Name, Sequence: SeqFailed(r.Step, r.Attempt), Reason: r.LastError}
			if err := s.postNow(ctx, o.ord, st, now); err != nil {
				return err
			}
		}
	}
	claimed, err := s.startCompensation(ctx, u, o, explicit, now)
	if err != nil || explicit {
		return err
	}
	return s.settleGiveUp(ctx, o, *m.GivenUp, claimed)
}

// settleGiveUp clears the compensate request a give-up still owes once the
// compensation it asked for has started, or was found done or not called
// for. The supervisor leaves the request owed after sending it, and sends
// it again if nobody settles it (docs/decisions.md, "A give-up's effects
// are owed until sent"; issue 29, N6). A claim of the given-up step's own
// undo settled it in its write (claimed); a claim of another step's, or
// none, needs this write. It is fenced on the give-up's state and attempt:
// a lost race means it was settled or moved on already.
func (s *Service) settleGiveUp(ctx context.Context, o order, g sas.GivenUp, claimed sas.StepKey) error {
	r, ok := o.step(g.Step)
	if !ok || r.ProcessState != sas.Error || r.Attempt != g.Attempt || !r.OwesCompensate() || claimed == r.Key() {
		return nil
	}
	_, err := s.cfg.Store.Settle(ctx, sas.SettleParams{Key: r.Key(), State: r.ProcessState, Attempt: r.Attempt})
	if errors.Is(err, sas.ErrLostRace) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("settling the compensate request of the give-up of step %s: %w", r.Key(), err)
	}
	return nil
}

// tellBeforeClaim delivers, before a compensation claim moves a failed step
// on, the alert its failure may still owe: a give-up's owed alert (the claim
// clears what is owed), or the scheduler's own alert of a refused step
// (after the claim, a redelivery of the failed reply no longer finds the
// step failed, so nothing would send it again). Only delivering an alert
// settles it (docs/decisions.md, "A give-up's effects are owed until
// sent"). The alert carries the id of the first, so a repeat pages nobody
// twice; the submitter is told the step failed too (tell; a compensate
// message tells of every failed step itself). A failed alert fails the
// message, and its redelivery tries again before claiming.
func (s *Service) tellBeforeClaim(ctx context.Context, o order, r sas.StepRecord, tell bool, now time.Time) error {
	var a *sas.Alert
	switch {
	case slices.Contains(r.Owes, sas.EffectAlert):
		owed := r.OwedAlert(r.GivenUpBy())
		a = &owed
	case r.ProcessState == sas.Error && r.Refused && !r.Rejected && !r.Cancelled, r.ProcessState == sas.CompensationFailed:
		// (A business rejection pages nobody: it was never alerted.)
		// Its alert went out from the reply that failed it, or not (the
		// reply's redelivery no longer finds it after this claim): the same
		// id again, so a repeat is known for one.
		own := alertFor(o, r, sas.AlertID(r.Key(), r.ProcessState, r.Attempt), r.LastError, r.UpdatedAt)
		a = &own
	}
	if a != nil {
		if err := s.cfg.Alerter.Alert(ctx, *a); err != nil {
			return fmt.Errorf("alerting about step %s before compensating it: %w", r.Key(), err)
		}
	}
	if tell && r.ProcessState == sas.Error && !r.Rejected && !r.Cancelled { // a rejection or a cancel is told when its order ends (ending)
		return s.postNow(ctx, o.ord, sas.Status{Status: sas.StatusFailed, Step: o.wf.Steps[r.Step].Name,
			Sequence: SeqFailed(r.Step, r.Attempt), Reason: r.LastError}, now)
	}
	return nil
}
