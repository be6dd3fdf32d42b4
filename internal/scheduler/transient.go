package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/internal/metrics"
	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
)

// A failure is not a wait (docs/protocol.md, issue 19). An agent that ran a
// request and got no answer (every try failed transiently, its breaker
// refused them, or the step's timeout passed) says so with a transient
// outcome. The scheduler counts the failure at once, fenced on the attempt
// it ends, and either hands the step to its next attempt after the retry
// policy's interval or, at its last attempt, gives it up (Error, an alert,
// the order's compensation) as the supervisor would. Nothing of this is left
// to the supervisor's judgement of busy queues: the attempt is over before
// its deadline comes.

// transient handles a transient outcome. It reads the step (one GetStep:
// the decision needs its failure count, and a failure is off the happy
// path), then makes the fenced write for what the record says.
func (s *Service) transient(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply, now time.Time) error {
	key := sas.StepKey{OrderID: rep.OrderID, Step: rep.Step}
	cur, err := s.cfg.Store.GetStep(ctx, key)
	if errors.Is(err, sas.ErrNotFound) {
		return drop(err, "transient reply for order %s step %d", rep.OrderID, rep.Step)
	}
	if err != nil {
		return fmt.Errorf("reading step %s for a transient reply: %w", key, err)
	}
	// A write that loses its race is looked at again from the record the
	// refusal returned, once: the record moved on, and what it moved to
	// decides (a rescue's retry claimed it, a late success, the supervisor).
	for range 2 {
		var again *sas.StepRecord
		again, err = s.transientOn(ctx, u, o, rep, cur, now)
		if err != nil || again == nil {
			return err
		}
		cur = *again
	}
	s.log.InfoContext(ctx, "transient reply: the step moved on twice meanwhile; nothing to do", "order", rep.OrderID, "step", rep.Step,
		"attempt", rep.Attempt, "state", cur.ProcessState, "currentAttempt", cur.Attempt)
	return nil
}

// transientOn acts on a transient outcome against the step as cur shows it.
// A non-nil record is one a fenced write lost to: look again from it.
func (s *Service) transientOn(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply, cur sas.StepRecord, now time.Time) (*sas.StepRecord, error) {
	undo := rep.Compensation
	running, _, failed := sas.Leg(undo)
	def := o.def(rep.Step)
	switch {
	case !undo && cur.Cancelled && heldFor(cur, rep):
		return s.cancelledTransient(ctx, u, o, rep, cur, now) // no next attempt (cancel.go)

	case cur.Attempt == rep.Attempt && cur.ProcessState == running && cur.LockedBy == rep.LockedBy:
		return s.attemptFailed(ctx, u, o, rep, cur, now)

	case !undo && cur.Cancelled && cur.Attempt == rep.Attempt && cur.LockedBy == "" && cur.ProcessState == sas.Pending:
		// Handed back after its order was cancelled: turned away, never
		// claimed again.
		return nil, s.turnAway(ctx, u, o, cur, now)

	case cur.Attempt == rep.Attempt && cur.LockedBy == "" && cur.ProcessState == sas.RescueTarget(running):
		// A redelivery of a reply whose hand-back was written but whose
		// next attempt was not claimed (a crash, a lost claim response), or
		// a supervisor's rescue of the same attempt: claim the next attempt
		// for when its wait ends. A claim that loses found it claimed.
		wait := max(cur.DueAt.Sub(now)-s.cfg.PickupTimeout, 0)
		return nil, s.reattempt(ctx, u, o, cur, def, wait, now)

	case cur.Attempt == rep.Attempt+1 && cur.ProcessState == running && cur.LockedBy != "":
		// The next attempt is claimed. On a redelivery its request may not
		// have gone out: sent again (resend; whoever holds it: the request
		// carries the holder), still delayed to the end of its wait. A
		// twin of the reply sends nothing.
		if s.resend(ctx, cur, now) {
			// The claim's deadline was the end of its wait plus the lease;
			// a supervisor's wait since moved it, and kept it as
			// WaitingSince.
			due := cur.CompleteBy
			if !cur.WaitingSince.IsZero() {
				due = cur.WaitingSince
			}
			wait := max(due.Sub(s.leaseEnd(def, undo, 0, now)), 0)
			s.dispatchAfter(ctx, u, o, def, cur, wait)
		}
		return nil, nil

	case cur.Attempt == rep.Attempt && cur.ProcessState == failed && cur.Owing():
		// A redelivery after the give-up: its effects again (the alert has
		// the same id; the compensation is idempotent).
		return nil, s.gaveUp(ctx, u, o, cur, now)

	case !undo && cur.Cancelled && cur.Attempt == rep.Attempt && cur.ProcessState == sas.Error && cur.FailedBy == rep.LockedBy:
		// A redelivery of the transient outcome that failed its cancelled
		// step (cancelledTransient), whose handler stopped before what
		// follows: the cancellation goes on from here, as for a retry that
		// turned a step away (idempotent; the simulator's deep sweep seed
		// 32446, an element whose handler died reading its fan-out's
		// elements, the fan-out then waiting for it for good).
		return nil, s.cancelledFailed(ctx, u, o, cur, now) // cancel.go

	case !undo && cur.Attempt == rep.Attempt+1 && cur.ProcessState == sas.Compensating && s.resend(ctx, cur, now):
		// A redelivery after the give-up's compensation claimed the step's
		// own undo: its first delivery may have died before sending it
		// (found by the simulator, seed 6106).
		s.dispatch(ctx, u, o, def, cur)
		return nil, nil
	}
	s.log.InfoContext(ctx, "stale transient reply", "order", rep.OrderID, "step", rep.Step,
		"attempt", rep.Attempt, "lockedBy", rep.LockedBy, "state", cur.ProcessState, "currentAttempt", cur.Attempt, "currentHolder", cur.LockedBy)
	if !undo && lateFor(cur, rep) {
		return nil, s.lateUnknown(ctx, u, o, rep, cur, now)
	}
	return nil, nil
}

// lateUnknown handles a forward step's transient outcome for an attempt
// that no longer holds the step. The agent made calls under the step's key
// and got no answer: the effect may exist, and since the request was
// acknowledged, no redelivery will ask the remote again (as a redelivery
// did before issue 19). A step still in flight asks again under the same
// key, and its answer decides; but one that ended in Error (a refusal of a
// twin delivery, from a remote that does not store refusals) would never
// be undone. So the effect is noted (UndoOwed) as for a late success, and
// a step in Error has its order's compensation started to undo it.
// Undoing a key that never took effect is a no-op by the undo's contract.
func (s *Service) lateUnknown(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply, cur sas.StepRecord, now time.Time) error {
	switch cur.ProcessState {
	case sas.Pending, sas.Processing, sas.Error:
	default:
		return nil // Processed: its own effect; undone or undoing: the undo covers the key
	}
	noted, err := s.cfg.Store.NoteEffect(ctx, sas.NoteEffectParams{
		Key: cur.Key(), State: cur.ProcessState, Now: now, Actor: s.cfg.Owner, Attempt: rep.Attempt,
	})
	if err != nil {
		return fmt.Errorf("noting the possible effect of step %s: %w", cur.Key(), err)
	}
	if noted.ProcessState != sas.Error || sas.IsElement(cur.Step) {
		return nil // an element in Error is undone with its fan-out anyway (fanoutstop.go)
	}
	s.log.WarnContext(ctx, "a failed attempt's effect may exist on a failed step: compensating", "order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt)
	if err := s.read(ctx, &o); err != nil {
		return err
	}
	_, err = s.startCompensation(ctx, u, o, false, now)
	return err
}

// attemptFailed counts the failure of the attempt cur holds and hands the
// step to its next attempt, or gives it up after the last.
func (s *Service) attemptFailed(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply, cur sas.StepRecord, now time.Time) (*sas.StepRecord, error) {
	def := o.def(rep.Step)
	// An undo has its own policy, which rides out an outage where the
	// step fails fast (docs/workflows.md, "Undo retry policy").
	pol := def.RetryFor(rep.Compensation, s.cfg.Retry, s.cfg.UndoRetry)
	failures := cur.FailureCount + 1
	why := transientWhy(rep)
	limit := totalDeadline(def, cur, rep.Compensation)
	if failures >= pol.MaxAttempts || (!limit.IsZero() && !now.Before(limit)) {
		reason := fmt.Sprintf("attempt %d failed: %s (failure %d of %d: giving up)", rep.Attempt, why, failures, pol.MaxAttempts)
		if failures < pol.MaxAttempts {
			reason = fmt.Sprintf("attempt %d failed: %s (failure %d of %d; the step's overall limit of %s since the order was submitted has passed: giving up)",
				rep.Attempt, why, failures, pol.MaxAttempts, def.TotalLimit)
		}
		p := sas.GiveUpParams{Key: cur.Key(), From: cur.ProcessState, Attempt: cur.Attempt, Now: now, Actor: s.cfg.Owner,
			Reason: reason, OwedAt: now.Add(s.cfg.OwedRetry), Holder: rep.LockedBy, Run: rep.Timing()}
		got, err := s.cfg.Store.GiveUp(ctx, p)
		if own, ok := sas.OwnWrite(err, s.cfg.Owner, now, sas.GiveUpTarget(cur.ProcessState), cur.Attempt); ok {
			got, err = own, nil // committed; its retry lost to it (docs/protocol.md, "Ambiguous commits")
		}
		if re := (*sas.RaceError)(nil); errors.As(err, &re) && re.Current != nil {
			return re.Current, nil
		}
		if err != nil {
			return nil, fmt.Errorf("giving up step %s after a transient outcome: %w", cur.Key(), err)
		}
		s.log.WarnContext(ctx, "step given up after its last attempt failed", "order", rep.OrderID, "step", rep.Step,
			"attempt", rep.Attempt, "compensation", rep.Compensation, "reason", reason)
		s.emitStep(ctx, o, rep.Step, rep.Compensation, now, metrics.StepsTransient, metrics.GiveUps)
		return nil, s.gaveUp(ctx, u, o, got, now)
	}
	wait := pol.Interval(failures, sas.JitterSeed(cur.Key(), cur.Attempt))
	if ra := time.Duration(rep.RetryAfterMs) * time.Millisecond; ra > wait {
		// The service said when: never sooner (rounded up to the second
		// an SQS delay counts in, within its longest delay).
		wait = min((ra+time.Second-1)/time.Second*time.Second, sas.DefaultMaxInterval)
	}
	if !limit.IsZero() && now.Add(wait).After(limit) {
		// The next attempt starts by the step's overall limit at the
		// latest (as the supervisor's hand-back waits no longer): a step
		// ends at most one attempt's timeout past it.
		wait = limit.Sub(now)
	}
	reason := fmt.Sprintf("attempt %d failed: %s (failure %d of %d: next attempt in %s)", rep.Attempt, why, failures, pol.MaxAttempts, wait)
	p := sas.RescueParams{Key: cur.Key(), From: cur.ProcessState, Attempt: cur.Attempt, Now: now,
		PickupBy: now.Add(wait + s.cfg.PickupTimeout), Actor: s.cfg.Owner, Reason: reason, Holder: rep.LockedBy, Run: rep.Timing()}
	got, err := s.cfg.Store.Rescue(ctx, p)
	if own, ok := sas.OwnWrite(err, s.cfg.Owner, now, sas.RescueTarget(cur.ProcessState), cur.Attempt); ok {
		got, err = own, nil
	}
	if re := (*sas.RaceError)(nil); errors.As(err, &re) && re.Current != nil {
		return re.Current, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ending attempt %d of step %s after a transient outcome: %w", cur.Attempt, cur.Key(), err)
	}
	s.log.InfoContext(ctx, "attempt failed; next attempt scheduled", "order", rep.OrderID, "step", rep.Step,
		"attempt", rep.Attempt, "compensation", rep.Compensation, "failures", failures, "wait", wait.String(), "reason", why)
	s.emitStep(ctx, o, rep.Step, rep.Compensation, now, metrics.StepsTransient, metrics.Retries)
	return nil, s.reattempt(ctx, u, o, got, def, wait, now)
}

// reattempt claims the next attempt of a step handed back by its holder
// (Pending, or Compensating without a holder) and sends its request delayed
// by wait: the attempt's lease runs from now to the end of the wait plus the
// step's timeout, and the request sits in the agent queue, invisible, until
// the wait is over. If the scheduler dies before the claim, the step is
// Pending with a pick-up deadline past the wait, and the supervisor re-drives
// it then (a failure counted, as for any stranded step).
func (s *Service) reattempt(ctx context.Context, u *outbox.Unit, o order, r sas.StepRecord, def sas.StepDef, wait time.Duration, now time.Time) error {
	cp := *s.claimParams(o, r, r.ProcessState, now)
	cp.CompleteBy = s.leaseEnd(def, r.ProcessState != sas.Pending, wait, now)
	claimed, err := s.cfg.Store.Claim(ctx, cp)
	if own, ok := sas.OwnClaim(err, cp); ok {
		claimed, err = own, nil
	}
	if refusedByFanOut(err, r.Key()) {
		return s.fencedOut(ctx, u, o, r, now) // fanoutstop.go
	}
	if errors.Is(err, sas.ErrLostRace) {
		// A retry (the supervisor's, after a crash of ours), or an earlier
		// delivery of this very reply, claimed it: that one sends the
		// request. A redelivery sends it again while no pick-up was
		// reported, as the earlier delivery's send may fail after this
		// one's acknowledgement (resend).
		s.log.InfoContext(ctx, "next attempt claimed elsewhere", "order", o.id(), "step", r.Step, "err", err)
		if re := (*sas.RaceError)(nil); errors.As(err, &re) && re.Current != nil && re.Current.Attempt == r.Attempt+1 &&
			s.resend(ctx, *re.Current, now) {
			s.dispatchAfter(ctx, u, o, def, *re.Current, wait)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("claiming the next attempt of step %s: %w", r.Key(), err)
	}
	s.dispatchAfter(ctx, u, o, def, claimed, wait)
	return nil
}

// gaveUp makes the effects of the scheduler's give-up of rec (Error or
// CompensationFailed, owing what the supervisor's give-up owes): the alert,
// the submitter's status and, for a forward step, the order's compensation,
// which undoes the given-up step too (its effect may exist). Then what was
// owed is settled; should this handler die first, the supervisor's sweep of
// owed effects sends them (docs/decisions.md, "A give-up's effects are owed
// until sent").
func (s *Service) gaveUp(ctx context.Context, u *outbox.Unit, o order, rec sas.StepRecord, now time.Time) error {
	if sas.IsElement(rec.Step) {
		return s.elementGaveUp(ctx, u, o, rec, now) // its fan-out stops (fanoutstop.go)
	}
	if rec.ProcessState == sas.CompensationFailed {
		if err := s.cfg.Alerter.Alert(ctx, rec.OwedAlert("scheduler")); err != nil {
			return fmt.Errorf("alerting about step %s: %w", rec.Key(), err)
		}
		s.post(ctx, u, o.ord, sas.Status{Status: sas.StatusFailed, Step: o.wf.Steps[rec.Step].Name,
			Sequence: SeqUndoFailed(o.n(), rec.Step, rec.Attempt), Reason: "compensation failed: " + rec.LastError}, now)
		s.settle(ctx, rec)
		return nil
	}
	if err := s.read(ctx, &o); err != nil {
		return err
	}
	// When the compensation starts with the given-up step's own undo, its
	// claim delivers the owed alert and the failed status first
	// (tellBeforeClaim) and clears what is owed; otherwise they are sent
	// here, after it (should this handler die first, the supervisor's sweep
	// of owed effects sends them).
	return s.compensateThenTell(ctx, u, o, rec.Key(), now, func() error {
		if err := s.cfg.Alerter.Alert(ctx, rec.OwedAlert("scheduler")); err != nil {
			return fmt.Errorf("alerting about step %s: %w", rec.Key(), err)
		}
		if err := s.postNow(ctx, o.ord, sas.Status{Status: sas.StatusFailed, Step: o.wf.Steps[rec.Step].Name,
			Sequence: SeqFailed(rec.Step, rec.Attempt), Reason: rec.LastError}, now); err != nil {
			return err
		}
		s.settle(ctx, rec)
		return nil
	})
}

// settle clears what rec's give-up owed, all of it having gone out. A
// settle that loses (settled already, or the compensation claim cleared
// it) is normal.
func (s *Service) settle(ctx context.Context, rec sas.StepRecord) {
	_, err := s.cfg.Store.Settle(ctx, sas.SettleParams{Key: rec.Key(), State: rec.ProcessState, Attempt: rec.Attempt})
	if err != nil && !errors.Is(err, sas.ErrLostRace) {
		// Still owed: the supervisor's sweep sends it again and settles it.
		s.log.WarnContext(ctx, "could not settle a give-up's effects; the supervisor re-sends them", "order", rec.OrderID,
			"step", rec.Step, "err", err)
	}
}

// transientWhy is what a transient outcome says, for the record.
func transientWhy(rep sas.AgentReply) string {
	why := rep.Reason
	if why == "" {
		why = "the agent reported a transient failure without a reason"
	}
	if rep.ErrorType != "" {
		why = rep.ErrorType + ": " + why
	}
	return why
}

// totalDeadline is when a forward step's overall limit (StepDef.TotalLimit,
// counted from the order's submission, which created the record) passes:
// the scheduler gives a transient step up at it, as the supervisor does
// (docs/workflows.md, "Retry policy"). Zero for an undo, a step without
// one, or a record without its creation time.
func totalDeadline(def sas.StepDef, r sas.StepRecord, undo bool) time.Time {
	if undo || def.TotalLimit <= 0 || r.CreatedAt.IsZero() {
		return time.Time{}
	}
	return r.CreatedAt.Add(def.TotalLimit)
}
