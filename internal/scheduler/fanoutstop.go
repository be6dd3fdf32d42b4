package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sas-go/sas/internal/metrics"
	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
)

// A fan-out that fails, and its undo (docs/decisions.md, "Fan-out elements
// are records of their own"). An element is a step record in every way but
// one: it is never among its order's records as read (GetOrder), so each
// path below reads its elements itself (ListElements, GetStep).
//
//   - An element's transient outcome is a step's (transient.go): the same
//     fenced writes on its record, its step's retry policy. Its late pick-up
//     (started.go) and the supervisor's rescue of it (retry.go) are a
//     step's too.
//   - An element refused (agent.Permanent), rejected (agent.Reject) or given
//     up (by the scheduler after its last attempt, or by the supervisor,
//     whose compensate names it) stops its fan-out (stopFanOut): the step's
//     record is failed, fenced on its holder, so no element counts or is
//     claimed after it (sas.CountElement refuses a step not running); then
//     every element still in flight is marked as a cancel marks a step
//     (sas.CancelStep), so that it settles without a next attempt, and the
//     step's failure has a failure's effects (afterFailed: the alert, or
//     none for a rejection, and the order's compensation).
//   - A cancel of the order marks the fan-out step and its elements in
//     flight; once they have settled, the step fails as cancelled
//     (fanOutSettled). In a graph, a failure of another branch stops a
//     fan-out in flight as an element's failure does (undoIfSettled).
//   - The fan-out step's undo is its elements' (undoElements): claimed
//     as any step's undo, newest first, it sends nothing before every
//     element has settled; then it undoes each element that took effect or
//     may have (Processed, or Error: a refusal is not proof of no effect),
//     one at a time, highest index first, each under its own undo key
//     (<order>:<step>:i<index>:undo) and seeing its own result; then the
//     step's undo completes and the order's compensation goes on.
//
// Whatever settles an element (its outcome, its turn-away, its undo's
// outcome) calls fanOutSettled, which moves its step on from there.

// elementOf reads the record of the element key of o, for a message that
// names it.
func (s *Service) elementOf(ctx context.Context, o order, key int) (sas.StepRecord, bool, error) {
	if sas.StepOf(key) >= o.n() || o.def(key).ForEach == nil {
		return sas.StepRecord{}, false, nil
	}
	r, err := s.cfg.Store.GetStep(ctx, sas.StepKey{OrderID: o.id(), Step: key})
	if errors.Is(err, sas.ErrNotFound) {
		return sas.StepRecord{}, false, nil
	}
	if err != nil {
		return sas.StepRecord{}, false, fmt.Errorf("reading element %d of order %s: %w", key, o.id(), err)
	}
	return r, true, nil
}

// elements reads every element record of fan-out step key, in index order.
func (s *Service) elements(ctx context.Context, key sas.StepKey) ([]sas.StepRecord, error) {
	fs, err := s.fanOutStore()
	if err != nil {
		return nil, err
	}
	return sas.AllElements(ctx, fs, key)
}

// fanOutKey is the key of the fan-out step an element's key belongs to.
func fanOutKey(orderID string, element int) sas.StepKey {
	return sas.StepKey{OrderID: orderID, Step: sas.StepOf(element)}
}

// elementFailed handles an element's failed reply (not an undo's): the
// element fails, as a step does, and its fan-out stops.
func (s *Service) elementFailed(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply, now time.Time) error {
	key := sas.StepKey{OrderID: rep.OrderID, Step: rep.Step}
	failed, err := s.cfg.Store.Fail(ctx, sas.FailParams{
		Key: key, Owner: rep.LockedBy, Attempt: rep.Attempt, Now: now, Reason: failReason(rep), Run: rep.Timing(),
		Rejected: rep.Rejected,
	})
	if err != nil {
		var re *sas.RaceError
		switch {
		case errors.Is(err, sas.ErrNotFound):
			return drop(err, "reply for order %s element %d", rep.OrderID, rep.Step)
		case !errors.As(err, &re) || re.Current == nil:
			return fmt.Errorf("recording the failure of element %s attempt %d: %w", key, rep.Attempt, err)
		}
		switch cur := *re.Current; {
		case classify(cur, rep) == replyFailedAgain:
			// A duplicate: its first delivery may have stopped before the
			// fan-out did.
			failed = cur
		case cur.Cancelled && heldFor(cur, rep):
			failed = cur // unreachable: a marked element's failure is written above
		case undoClaimedSince(cur, rep):
			return s.undoGoesOn(ctx, u, o, rep, now)
		default:
			s.log.InfoContext(ctx, "stale element failure ignored", "order", rep.OrderID, "element", rep.Step, "attempt", rep.Attempt,
				"state", cur.ProcessState, "currentAttempt", cur.Attempt)
			return nil
		}
	}
	_, index := sas.ElementOf(rep.Step)
	s.log.WarnContext(ctx, "element failed", "order", rep.OrderID, "step", sas.StepOf(rep.Step), "element", index,
		"rejected", failed.Rejected, "reason", failed.LastError)
	if failed.Cancelled {
		// Marked: its fan-out stopped already, or its order was cancelled.
		return s.fanOutSettled(ctx, u, o, fanOutKey(rep.OrderID, rep.Step), now)
	}
	return s.stopFanOut(ctx, u, o, fanOutKey(rep.OrderID, rep.Step),
		fmt.Sprintf("element %d failed: %s", index, failed.LastError), failed.Rejected, now)
}

// undoClaimedSince reports whether element cur, as a write refused to
// reply rep found it, has had its undo claimed since rep's attempt.
func undoClaimedSince(cur sas.StepRecord, rep sas.AgentReply) bool {
	return cur.ProcessState == sas.Compensating && cur.Attempt == rep.Attempt+1 && !rep.Compensation
}

// undoGoesOn handles an element's reply (its failure, its success) that
// finds the element's undo claimed since (undoClaimedSince): this reply's
// first delivery may have claimed it, through its fan-out's compensation,
// and died before sending it, so the fan-out's undo goes on from here (a
// redelivery sends it again: the simulator's seeds 136 and 3310).
func (s *Service) undoGoesOn(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply, now time.Time) error {
	s.log.InfoContext(ctx, "element reply after its undo was claimed: the fan-out's undo goes on", "order", rep.OrderID, "element", rep.Step,
		"attempt", rep.Attempt, "outcome", rep.Outcome)
	return s.fanOutSettled(ctx, u, o, fanOutKey(rep.OrderID, rep.Step), now)
}

// elementGaveUp makes the effects of the give-up of element rec (by the
// scheduler after its last attempt, or by the supervisor at its deadline):
// its own alert, then its fan-out stops; an undo's give-up is its
// fan-out's undo failing (fanOutSettled).
func (s *Service) elementGaveUp(ctx context.Context, u *outbox.Unit, o order, rec sas.StepRecord, now time.Time) error {
	if slices.Contains(rec.Owes, sas.EffectAlert) {
		if err := s.cfg.Alerter.Alert(ctx, rec.OwedAlert("scheduler")); err != nil {
			return fmt.Errorf("alerting about element %s: %w", rec.Key(), err)
		}
	}
	s.settle(ctx, rec)
	if rec.ProcessState == sas.CompensationFailed || rec.Cancelled {
		return s.fanOutSettled(ctx, u, o, fanOutKey(rec.OrderID, rec.Step), now)
	}
	_, index := sas.ElementOf(rec.Step)
	return s.stopFanOut(ctx, u, o, fanOutKey(rec.OrderID, rec.Step), fmt.Sprintf("element %d given up: %s", index, rec.LastError), false, now)
}

// stopFanOut stops the fan-out step key after one of its elements failed
// for good (why): the step fails (Rejected with rejected), so that no
// element counts or starts after it (its elements' claims are fenced on
// it: sas.ClaimParams.Fences), its elements in flight are marked, and the
// failure has its effects. A step stopped already (a redelivery of the
// failure whose handler died between the step's failure and the marks, or
// another element's failure meanwhile) is driven again from its marks: they
// are idempotent, and so are the failure's effects (its alert under the
// same id, its status under the same sequence, the compensation's claims).
func (s *Service) stopFanOut(ctx context.Context, u *outbox.Unit, o order, key sas.StepKey, why string, rejected bool, now time.Time) error {
	st, err := s.cfg.Store.GetStep(ctx, key)
	if err != nil {
		return fmt.Errorf("reading fan-out %s to stop it: %w", key, err)
	}
	switch {
	case st.ProcessState == sas.Error && st.ForEachCount > 0:
		s.log.InfoContext(ctx, "fan-out stopped already: its marks and its failure's effects again", "order", key.OrderID, "step", key.Step)
	case st.ProcessState == sas.Processing && st.ForEachCount > 0 && st.Cancelled:
		// Its order was cancelled: the cancel's rule settles it.
		return s.fanOutSettled(ctx, u, o, key, now)
	case st.ProcessState == sas.Processing && st.ForEachCount > 0:
		failed, err := s.cfg.Store.Fail(ctx, sas.FailParams{
			Key: key, Owner: st.LockedBy, Attempt: st.Attempt, Now: now, Reason: why, Rejected: rejected,
			// Its elements that took effect are undone with it.
			Effect: true,
		})
		if re := (*sas.RaceError)(nil); errors.As(err, &re) && re.Current != nil {
			// Stopped by another element's failure meanwhile, or cancelled.
			s.log.InfoContext(ctx, "fan-out moved while it was stopped: looking again", "order", key.OrderID, "step", key.Step,
				"state", re.Current.ProcessState)
			if re.Current.ProcessState == sas.Error {
				st = *re.Current
				break
			}
			return s.fanOutSettled(ctx, u, o, key, now)
		}
		if err != nil {
			return fmt.Errorf("stopping fan-out %s: %w", key, err)
		}
		st = failed
		s.log.WarnContext(ctx, "fan-out stopped: no element starts after this", "order", key.OrderID, "step", key.Step,
			"done", st.ForEachDone, "of", st.ForEachCount, "reason", why)
		s.emitStep(ctx, o, key.Step, false, now, metrics.StepsFailed)
	default:
		// Completed, or undone already: nothing of its window runs.
		return s.fanOutSettled(ctx, u, o, key, now)
	}
	if _, err := s.markElements(ctx, key, "its fan-out stopped: "+why, now); err != nil {
		return err
	}
	o.steps = nil // the failure's effects read the order after its write
	return s.afterFailed(ctx, u, o, st, false, now)
}

// markElements marks every element of fan-out key still in flight as a
// cancel marks a step (sas.CancelStep): one held settles without a next
// attempt, one handed back for its next attempt is turned away (Error:
// its earlier attempt may have taken effect). It reports whether an element
// is still held after the marks. Marking is idempotent: a second pass (a
// stop redelivered after its handler died between the step's failure and
// the marks) marks what the first did not reach and writes nothing else.
func (s *Service) markElements(ctx context.Context, key sas.StepKey, why string, now time.Time) (bool, error) {
	els, err := s.elements(ctx, key)
	if err != nil {
		return false, err
	}
	held := false
	for _, e := range els {
		if e, err = s.markElement(ctx, e, why, now); err != nil {
			return false, err
		}
		if e.ProcessState == sas.Processing {
			held = true
		}
	}
	return held, nil
}

// markElement marks element e, as read, if it is in flight (markElements),
// looking again when it moved meanwhile; it returns the element as it
// leaves it.
func (s *Service) markElement(ctx context.Context, e sas.StepRecord, why string, now time.Time) (sas.StepRecord, error) {
	for tries := 0; tries < 3; tries++ {
		var from sas.ProcessState
		switch {
		case e.ProcessState == sas.Processing && !e.Cancelled:
			from = sas.Processing
		case e.ProcessState == sas.Pending && e.LockedBy == "":
			from = sas.Pending
		}
		if from == "" {
			return e, nil
		}
		to := sas.Processing
		if from == sas.Pending {
			to = sas.Error
		}
		got, err := s.cfg.Store.Cancel(ctx, sas.CancelParams{Key: e.Key(), From: from, Attempt: e.Attempt, Now: now, Actor: s.cfg.Owner, Reason: why})
		if own, ok := sas.OwnWrite(err, s.cfg.Owner, now, to, e.Attempt); ok {
			got, err = own, nil
		}
		if re := (*sas.RaceError)(nil); errors.As(err, &re) && re.Current != nil {
			e = *re.Current // moved meanwhile (settled, claimed again): look again
			continue
		}
		if err != nil {
			return e, fmt.Errorf("marking element %s: %w", e.Key(), err)
		}
		return got, nil
	}
	return e, nil
}

// fencedOut handles the claim of element r's next attempt refused by its
// fan-out's fence (sas.ClaimParams.Fences: the fan-out stopped, was
// cancelled or is being undone since the element was handed back): the
// element never starts again. It is turned away as the stop's marks turn
// one away (Pending → Error, marked: its earlier attempt may have taken
// effect, so it is undone with the rest), and its fan-out moves on.
func (s *Service) fencedOut(ctx context.Context, u *outbox.Unit, o order, r sas.StepRecord, now time.Time) error {
	_, index := sas.ElementOf(r.Step)
	s.log.InfoContext(ctx, "element's next attempt refused: its fan-out no longer runs", "order", r.OrderID,
		"step", sas.StepOf(r.Step), "element", index, "attempt", r.Attempt)
	if _, err := s.markElement(ctx, r, "its fan-out no longer runs", now); err != nil {
		return err
	}
	return s.fanOutSettled(ctx, u, o, fanOutKey(r.OrderID, r.Step), now)
}

// refusedByFanOut reports whether err is a claim of element key refused by
// its fan-out's fence rather than by the element itself.
func refusedByFanOut(err error, key sas.StepKey) bool {
	var re *sas.RaceError
	return sas.IsElement(key.Step) && errors.As(err, &re) && re.Key == fanOutKey(key.OrderID, key.Step)
}

// fanOutSettled moves fan-out step key on after one of its elements
// settled (or whenever its undo is driven): a cancelled fan-out fails once
// no element is held; one whose undo is claimed undoes its next element.
// A stopped fan-out not yet reached by its order's compensation waits for
// it.
func (s *Service) fanOutSettled(ctx context.Context, u *outbox.Unit, o order, key sas.StepKey, now time.Time) error {
	st, err := s.cfg.Store.GetStep(ctx, key)
	if err != nil {
		return fmt.Errorf("reading fan-out %s: %w", key, err)
	}
	def := o.def(key.Step)
	switch {
	case st.ProcessState == sas.Compensating && st.ForEachCount > 0 && st.LockedBy != "":
		return s.undoElements(ctx, u, o, def, st)
	case st.ProcessState == sas.Error && st.ForEachCount > 0:
		return s.resumeStopped(ctx, u, o, now)
	case st.ProcessState == sas.Processing && st.ForEachCount > 0 && st.Cancelled:
		held, err := s.markElements(ctx, key, "its order was cancelled", now)
		if err != nil || held {
			return err
		}
		// Every element settled: the fan-out fails as a cancelled step
		// whose attempt failed (no page; its order's compensation).
		s.log.InfoContext(ctx, "cancelled fan-out settled", "order", key.OrderID, "step", key.Step)
		return s.settleStep(ctx, u, o, def, st, sas.AgentReply{Outcome: sas.OutcomeFailed,
			Reason: fmt.Sprintf("cancelled while its elements ran (%d of %d done); they have settled", st.ForEachDone, st.ForEachCount)})
	}
	return nil
}

// fanOutUndoneAgain moves fan-out step key on after a duplicate of an
// element's undo reply. The first delivery may have been the one whose
// handling completed the fan-out's undo (its last element's), claimed the
// order's next undo and died before its request: if the fan-out is
// undone, the duplicate repeats that success, as a duplicate of any undo's
// does (duplicateDone: the next undo's request sent again on a
// redelivery; the simulator's seed 817 with -fanout-failures).
func (s *Service) fanOutUndoneAgain(ctx context.Context, u *outbox.Unit, o order, key sas.StepKey, now time.Time) error {
	st, err := s.cfg.Store.GetStep(ctx, key)
	if err != nil {
		return fmt.Errorf("reading fan-out %s: %w", key, err)
	}
	if st.ProcessState == sas.CompensationFailed && st.ForEachCount > 0 && st.FailedBy != "" {
		// The fan-out's undo failed with this element's (undoElements):
		// that handling may have stopped before the alert and the status,
		// which its redelivery tells again, under the same id (the
		// simulator's deep sweep seed 53430).
		return s.afterFailed(ctx, u, o, st, true, now)
	}
	if st.ProcessState != sas.Compensated || st.ForEachCount == 0 {
		return s.fanOutSettled(ctx, u, o, key, now)
	}
	return s.duplicateDone(ctx, u, o, sas.AgentReply{V: sas.MessageVersion, Kind: sas.KindAgentReply, OrderID: o.id(), Step: st.Step,
		StepName: st.StepName, Attempt: st.Attempt, Generation: st.Generation, Outcome: sas.OutcomeDone, Compensation: true}, now)
}

// undoElements is the dispatch of fan-out step st's undo, claimed: nothing
// before its elements have settled, then the undo of the highest element
// that took effect or may have, one at a time; after the last, the step's
// undo completes.
func (s *Service) undoElements(ctx context.Context, u *outbox.Unit, o order, def sas.StepDef, st sas.StepRecord) error {
	now := s.cfg.Clock.Now()
	held, err := s.markElements(ctx, st.Key(), "its fan-out is being undone", now)
	if err != nil {
		return err
	}
	if held {
		s.log.InfoContext(ctx, "fan-out's elements in flight settle before any is undone", "order", st.OrderID, "step", st.Step)
		return nil
	}
	els, err := s.elements(ctx, st.Key())
	if err != nil {
		return err
	}
	for i := len(els) - 1; i >= 0; i-- {
		e := els[i]
		switch e.ProcessState {
		case sas.Processing:
			return nil // claimed again since the marks: its outcome calls this again
		case sas.Compensating:
			if e.LockedBy != "" && s.resend(ctx, e, now) {
				s.dispatch(ctx, u, o, def, e)
			}
			return nil // running, or handed back to the supervisor, which re-drives it
		case sas.CompensationFailed:
			_, index := sas.ElementOf(e.Step)
			return s.settleStep(ctx, u, o, def, st, sas.AgentReply{Outcome: sas.OutcomeFailed, Compensation: true,
				Reason: fmt.Sprintf("the undo of element %d failed: %s", index, e.LastError)})
		case sas.Processed, sas.Error:
			if def.Undo == "" {
				continue
			}
			cp := sas.ClaimParams{Key: e.Key(), From: e.ProcessState, Attempt: e.Attempt, Owner: s.cfg.Owner, Now: now,
				CompleteBy: s.leaseEnd(def, true, 0, now)}
			claimed, err := s.cfg.Store.Claim(ctx, cp)
			if own, ok := sas.OwnClaim(err, cp); ok {
				claimed, err = own, nil
			}
			if re := (*sas.RaceError)(nil); errors.As(err, &re) {
				// Another delivery claimed it: that one sends it (a
				// redelivery sends it again while no pick-up was reported).
				if re.Current != nil && re.Current.ProcessState == sas.Compensating && s.resend(ctx, *re.Current, now) {
					s.dispatch(ctx, u, o, def, *re.Current)
				}
				return nil
			}
			if err != nil {
				return fmt.Errorf("claiming the undo of element %s: %w", e.Key(), err)
			}
			_, index := sas.ElementOf(e.Step)
			s.log.InfoContext(ctx, "element undo claimed", "order", st.OrderID, "step", st.Step, "element", index)
			s.dispatch(ctx, u, o, def, claimed)
			return nil
		}
	}
	// Every element that took effect is undone: so is the step.
	s.log.InfoContext(ctx, "fan-out undone", "order", st.OrderID, "step", st.Step, "elements", len(els))
	return s.settleStep(ctx, u, o, def, st, sas.AgentReply{Outcome: sas.OutcomeDone, Compensation: true})
}

// elementUndoReply handles the done or failed reply of an element's undo:
// the element is Compensated or CompensationFailed, fenced as a step's
// undo is, and its fan-out's undo goes on.
func (s *Service) elementUndoReply(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply, now time.Time) error {
	key := sas.StepKey{OrderID: rep.OrderID, Step: rep.Step}
	var err error
	if rep.Outcome == sas.OutcomeFailed {
		_, err = s.cfg.Store.Fail(ctx, sas.FailParams{Key: key, Owner: rep.LockedBy, Attempt: rep.Attempt, Now: now,
			Reason: failReason(rep), Compensation: true, Run: rep.Timing()})
	} else {
		_, err = s.cfg.Store.Complete(ctx, sas.CompleteParams{Key: key, Owner: rep.LockedBy, Attempt: rep.Attempt, Now: now,
			Compensation: true, Run: rep.Timing(), By: completerOf(ctx)})
	}
	if err != nil {
		var re *sas.RaceError
		switch {
		case errors.Is(err, sas.ErrNotFound):
			return drop(err, "undo reply for order %s element %d", rep.OrderID, rep.Step)
		case !errors.As(err, &re) || re.Current == nil:
			return fmt.Errorf("recording the undo reply of element %s attempt %d: %w", key, rep.Attempt, err)
		}
		switch classify(*re.Current, rep) {
		case replyDoneAgain, replyFailedAgain:
			s.log.InfoContext(ctx, "duplicate element undo reply", "order", rep.OrderID, "element", rep.Step, "attempt", rep.Attempt)
			return s.fanOutUndoneAgain(ctx, u, o, fanOutKey(rep.OrderID, rep.Step), now)
		default:
			s.log.InfoContext(ctx, "stale element undo reply ignored", "order", rep.OrderID, "element", rep.Step, "attempt", rep.Attempt)
			return nil
		}
	} else {
		_, index := sas.ElementOf(rep.Step)
		s.log.InfoContext(ctx, "element undone", "order", rep.OrderID, "step", sas.StepOf(rep.Step), "element", index, "outcome", rep.Outcome)
	}
	return s.fanOutSettled(ctx, u, o, fanOutKey(rep.OrderID, rep.Step), now)
}

// elementDoneStopped records the success of an element whose fan-out no
// longer counts it (stopped, or cancelled): the element is Processed, its
// result kept for its undo, no element claimed after it; then its fan-out
// moves on.
func (s *Service) elementDoneStopped(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply, result sas.Item, now time.Time) error {
	key := sas.StepKey{OrderID: rep.OrderID, Step: rep.Step}
	_, err := s.cfg.Store.Complete(ctx, sas.CompleteParams{Key: key, Owner: rep.LockedBy, Attempt: rep.Attempt, Now: now,
		Result: result, Run: rep.Timing(), Cancelled: true, By: completerOf(ctx)})
	if err != nil {
		var re *sas.RaceError
		if !errors.As(err, &re) || re.Current == nil {
			return fmt.Errorf("completing element %s of a stopped fan-out: %w", key, err)
		}
		if classify(*re.Current, rep) != replyDoneAgain {
			s.log.InfoContext(ctx, "stale element reply ignored", "order", rep.OrderID, "element", rep.Step, "attempt", rep.Attempt)
			return nil
		}
	}
	_, index := sas.ElementOf(rep.Step)
	s.log.InfoContext(ctx, "element done after its fan-out stopped: nothing claimed after it", "order", rep.OrderID,
		"step", sas.StepOf(rep.Step), "element", index)
	return s.fanOutSettled(ctx, u, o, fanOutKey(rep.OrderID, rep.Step), now)
}

// elementGivenUp handles the supervisor's compensate after it gave up
// element g at its deadline (it sent the alert itself): the element's
// fan-out stops, as after the element's failure. A compensate for a
// give-up that no longer stands changes nothing.
func (s *Service) elementGivenUp(ctx context.Context, u *outbox.Unit, o order, g sas.GivenUp, now time.Time) error {
	rec, ok, err := s.elementOf(ctx, o, g.Step)
	if err != nil {
		return err
	}
	if !ok {
		return drop(nil, "compensate for order %s: no element %d", o.id(), g.Step)
	}
	if rec.ProcessState != sas.Error || rec.Attempt != g.Attempt {
		s.log.InfoContext(ctx, "compensate for an element's give-up that no longer stands", "order", o.id(), "element", g.Step,
			"state", rec.ProcessState, "attempt", rec.Attempt)
		return nil
	}
	_, index := sas.ElementOf(rec.Step)
	if rec.Cancelled {
		err = s.fanOutSettled(ctx, u, o, fanOutKey(rec.OrderID, rec.Step), now)
	} else {
		err = s.stopFanOut(ctx, u, o, fanOutKey(rec.OrderID, rec.Step), fmt.Sprintf("element %d given up: %s", index, rec.LastError), false, now)
	}
	if err != nil {
		return err
	}
	if rec.OwesCompensate() {
		s.settle(ctx, rec)
	}
	return nil
}

// fanOutHeld is an element still in flight of a fan-out of o stopped in
// Error, nil if none: no undo of the order is sent before it settles (the
// branches' settle-then-undo rule). It reads elements only for a stopped
// fan-out, off the happy path.
func (s *Service) fanOutHeld(ctx context.Context, o order) (*sas.StepRecord, error) {
	for _, r := range o.steps {
		if r.ProcessState != sas.Error || r.ForEachCount == 0 {
			continue
		}
		els, err := s.elements(ctx, r.Key())
		if err != nil {
			return nil, err
		}
		for _, e := range els {
			if e.ProcessState == sas.Processing || e.ProcessState == sas.Pending {
				s.log.InfoContext(ctx, "a stopped fan-out's element in flight settles before anything is undone", "order", o.id(),
					"step", r.Step, "element", e.Step, "state", e.ProcessState)
				return &e, nil
			}
		}
	}
	return nil, nil
}

// resumeStopped goes on with the order of a stopped fan-out, whose
// compensation waits for its elements (fanOutHeld): it may start once none
// is held.
func (s *Service) resumeStopped(ctx context.Context, u *outbox.Unit, o order, now time.Time) error {
	if err := s.read(ctx, &o); err != nil {
		return err
	}
	_, err := s.startCompensation(ctx, u, o, false, now)
	return err
}
