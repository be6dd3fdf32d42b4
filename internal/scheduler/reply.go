package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// replyCase is what a reply means for the record of its step.
type replyCase int

const (
	replyStale       replyCase = iota // the attempt is gone (rescued, re-claimed, given up): ignore
	replyApply                        // the attempt still holds the step: write the outcome
	replyDoneAgain                    // this attempt already completed: a duplicate of a success
	replyFailedAgain                  // this attempt already failed by this holder: a duplicate of a failure
)

// classify reads a reply against the record of its step. Attempts only grow
// and a claim fixes its leg (forward or undo), so the record at the reply's
// attempt tells whether the reply is for an undo whatever the reply echoes
// (or from an older agent, does not). The fenced write stays the authority;
// this only decides what to try.
func classify(r sas.StepRecord, rep sas.AgentReply) (c replyCase, undo bool) {
	if r.Attempt != rep.Attempt {
		return replyStale, false
	}
	undo = r.ProcessState == sas.Compensating || r.ProcessState == sas.Compensated || r.ProcessState == sas.CompensationFailed
	switch r.ProcessState {
	case sas.Processing, sas.Compensating:
		if r.LockedBy == rep.LockedBy {
			return replyApply, undo
		}
	case sas.Processed, sas.Compensated:
		if rep.Outcome == sas.OutcomeDone {
			return replyDoneAgain, undo
		}
	case sas.Error, sas.CompensationFailed:
		// Only a failure this holder wrote: a supervisor that gave up on the
		// same attempt alerts and asks for compensation itself.
		if rep.Outcome == sas.OutcomeFailed && lastMoveBy(r, rep.LockedBy) {
			return replyFailedAgain, undo
		}
	}
	return replyStale, undo
}

// lastMoveBy reports whether the record's latest transition was made by actor
// at the record's attempt.
func lastMoveBy(r sas.StepRecord, actor string) bool {
	if len(r.History) == 0 {
		return false
	}
	h := r.History[len(r.History)-1]
	return h.To == r.ProcessState && h.Attempt == r.Attempt && h.Actor == actor
}

func checkReply(rep sas.AgentReply) error {
	switch {
	case !sas.ValidOrderID(rep.OrderID):
		return &sas.ValidationError{Field: "orderId", Reason: "missing or malformed"}
	case rep.Step < 0:
		return &sas.ValidationError{Field: "step", Reason: "must not be negative"}
	case rep.Attempt < 1:
		return &sas.ValidationError{Field: "attempt", Reason: "must be at least 1"}
	case rep.LockedBy == "":
		return &sas.ValidationError{Field: "lockedBy", Reason: "required: the reply is fenced on it"}
	case rep.Outcome != sas.OutcomeDone && rep.Outcome != sas.OutcomeFailed:
		return &sas.ValidationError{Field: "outcome", Reason: fmt.Sprintf("%q is neither %q nor %q", rep.Outcome, sas.OutcomeDone, sas.OutcomeFailed)}
	}
	return nil
}

// Reply handles an agent's answer for one attempt of one step or undo
// (docs/protocol.md, "agent.reply").
//
// A reply that echoes its order (workflow, step name, payload, replyTo,
// compensation: see sas.AgentReply) is first tried without reading the order:
// the fenced write is made straight away and, on the happy path, is the only
// store call. Whenever that path cannot decide alone (its write lost and the
// record the loss returned does not show the reply stale: a duplicate, a
// successor not as expected, a wrongly echoed leg; or the reply needs the
// step records) it falls back to reading the order, which is also how a
// reply without the echo (from an older agent) is handled. The package
// comment tabulates the store calls of each case.
func (s *Service) Reply(ctx context.Context, rep sas.AgentReply) error {
	if err := checkReply(rep); err != nil {
		return drop(err, "agent reply")
	}
	if o, ok := s.fromEcho(rep); ok {
		err := s.replyUnread(ctx, o, rep)
		if !errors.Is(err, errNeedRead) {
			return err
		}
		s.log.InfoContext(ctx, "reply handled from a read of the order", "order", rep.OrderID, "step", rep.Step,
			"attempt", rep.Attempt, "outcome", rep.Outcome, "why", err.Error())
	}
	return s.replyRead(ctx, rep)
}

// errNeedRead sends a reply from the read-free path to the read path.
var errNeedRead = errors.New("the order must be read")

// fromEcho builds, from what a reply echoes, the part of the order the
// read-free path needs: the workflow (from this deployment's registry), the
// payload and the replyTo, without step records. ok is false for a reply
// without the echo, for a workflow this deployment does not register, and
// for a step name that is not the workflow's step at that index (the
// workflow changed under the order): the read path sorts those out.
//
// The echoed fields only say what to try. The write they lead to is fenced on
// the step's state, holder and attempt like any other: a reply that echoes
// the wrong leg (forward or undo) makes it lose, and the read path takes
// over. What the fence cannot check is the shape of the workflow: the next
// step comes from this deployment's registry, not from the order's stored
// step list as on the read path. Hence the rule in the package comment:
// never change a registered workflow's steps in place while orders run.
func (s *Service) fromEcho(rep sas.AgentReply) (order, bool) {
	if rep.Workflow == "" || rep.StepName == "" {
		return order{}, false
	}
	w, ok := s.cfg.Workflows[rep.Workflow]
	if !ok || rep.Step >= len(w.Steps) || w.Steps[rep.Step].Name != rep.StepName {
		return order{}, false
	}
	ord := sas.Order{OrderID: rep.OrderID, Workflow: w.Name, Payload: rep.Payload, ReplyTo: rep.ReplyTo, Steps: w.StepNames()}
	return order{view: sas.OrderView{Order: ord}, wf: w, unread: true}, true
}

// undoBelow reports whether a step before step has an Undo: only then can a
// compensation have anything to do below it, and only the step records say
// what (a step without an Undo never enters the undo leg).
func undoBelow(w sas.Workflow, step int) bool {
	for _, d := range w.Steps[:min(step, len(w.Steps))] {
		if d.Undo != "" {
			return true
		}
	}
	return false
}

// replyUnread handles a reply without reading the order (the hot path):
//
//   - done, forward: Complete, with the claim of step+1 (taken from the
//     registry) in the same transaction when there is one. While a step runs,
//     the steps after it have never been claimed (an order runs its steps in
//     order and never goes back), so the successor is claimed as Pending at
//     attempt 0; the claim is fenced on that, so a wrong guess is refused and
//     the read path claims from what it reads;
//   - failed, forward or undo: Fail. The alert and the "failed" status need
//     nothing more; starting the compensation reads the order (in afterFailed)
//     only when an earlier step has an Undo;
//   - done, undo: Complete when no earlier step has an Undo (nothing left to
//     undo: "compensated"); otherwise the next undo depends on the records,
//     so the order is read.
//
// It returns an error wrapping errNeedRead when the read path must take over;
// no side effect has been made then.
func (s *Service) replyUnread(ctx context.Context, o order, rep sas.AgentReply) error {
	now := s.cfg.Clock.Now()
	undo := rep.Compensation
	key := sas.StepKey{OrderID: rep.OrderID, Step: rep.Step}
	if rep.Outcome == sas.OutcomeFailed {
		reason := failReason(rep)
		failed, err := s.cfg.Store.Fail(ctx, sas.FailParams{
			Key: key, Owner: rep.LockedBy, Attempt: rep.Attempt, Now: now, Reason: reason, Compensation: undo,
		})
		if err != nil {
			return s.unreadLost(ctx, key, rep, err)
		}
		s.log.WarnContext(ctx, "step failed", "order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt, "compensation", undo, "reason", reason)
		return s.afterFailed(ctx, o, failed, undo, now)
	}
	var next *sas.ClaimParams
	switch {
	case undo && undoBelow(o.wf, rep.Step):
		return fmt.Errorf("the next undo depends on the earlier steps' records: %w", errNeedRead)
	case !undo && rep.Step+1 < o.n():
		next = s.claimParams(o, sas.StepRecord{OrderID: rep.OrderID, Step: rep.Step + 1}, sas.Pending, now)
	}
	recs, err := s.cfg.Store.Complete(ctx, sas.CompleteParams{
		Key: key, Owner: rep.LockedBy, Attempt: rep.Attempt, Now: now, Compensation: undo, Next: next,
	})
	if err != nil {
		return s.unreadLost(ctx, key, rep, err)
	}
	var claimed *sas.StepRecord
	if next != nil {
		if len(recs) < 2 {
			// The store broke its contract. The write is made: a redelivery
			// takes the duplicate branch and dispatches the successor.
			return fmt.Errorf("completing step %s: the store did not return the claimed step %d", key, next.Key.Step)
		}
		claimed = &recs[1]
	}
	s.log.InfoContext(ctx, "step done", "order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt, "compensation", undo)
	return s.afterDone(ctx, o, rep, undo, claimed, now)
}

// unreadLost sorts out a failed write of the read-free path. A reply that
// the record returned with the lost race shows to be stale is acknowledged
// here: attempts only grow, so no later read could make it live again. Any
// other lost race or missing record is for the read path to explain (a
// duplicate, an undo echoed as a forward step, a successor not as guessed,
// no such order); anything else (the store unreachable, throttling) fails
// the message, and its redelivery tries again.
func (s *Service) unreadLost(ctx context.Context, key sas.StepKey, rep sas.AgentReply, err error) error {
	var re *sas.RaceError
	if errors.As(err, &re) && re.Key == key && re.Current != nil {
		if c, _ := classify(*re.Current, rep); c == replyStale {
			s.stale(ctx, rep, *re.Current)
			return nil
		}
	}
	if errors.Is(err, sas.ErrLostRace) || errors.Is(err, sas.ErrNotFound) {
		return fmt.Errorf("recording the reply without a read: %w: %w", errNeedRead, err)
	}
	return fmt.Errorf("recording the reply of step %s attempt %d: %w", key, rep.Attempt, err)
}

// replyRead handles a reply from a read of the order: a reply without the
// echo, and whatever the read-free path could not decide alone. The read
// classifies the reply (live, duplicate or stale; forward or undo) before
// any write.
func (s *Service) replyRead(ctx context.Context, rep sas.AgentReply) error {
	o, err := s.load(ctx, rep.OrderID)
	if err != nil {
		return err
	}
	rec, ok := o.step(rep.Step)
	if !ok {
		return drop(nil, "order %s has no step %d", rep.OrderID, rep.Step)
	}
	now := s.cfg.Clock.Now()
	c, undo := classify(rec, rep)
	switch c {
	case replyApply:
		if rep.Outcome == sas.OutcomeDone {
			return s.complete(ctx, o, rec, rep, undo, now)
		}
		return s.fail(ctx, o, rec, rep, undo, now)
	case replyDoneAgain:
		s.log.InfoContext(ctx, "duplicate reply: step already done", "order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt, "compensation", undo)
		return s.afterDone(ctx, o, rep, undo, nil, now)
	case replyFailedAgain:
		s.log.InfoContext(ctx, "duplicate reply: step already failed", "order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt, "compensation", undo)
		return s.afterFailed(ctx, o, rec, undo, now)
	}
	s.stale(ctx, rep, rec)
	return nil
}

func (s *Service) stale(ctx context.Context, rep sas.AgentReply, cur sas.StepRecord) {
	s.log.InfoContext(ctx, "stale reply ignored", "order", rep.OrderID, "step", rep.Step,
		"attempt", rep.Attempt, "lockedBy", rep.LockedBy, "outcome", rep.Outcome,
		"state", cur.ProcessState, "currentAttempt", cur.Attempt, "currentHolder", cur.LockedBy)
}

// complete writes a done reply. The successor (the next step, or the next
// undo) is claimed in the same transaction, so that no crash can leave a
// finished step with a successor nobody owns and nobody will look for.
func (s *Service) complete(ctx context.Context, o order, rec sas.StepRecord, rep sas.AgentReply, undo bool, now time.Time) error {
	var next *sas.ClaimParams
	if undo {
		if r, ok := nextUndo(o, rep.Step); ok {
			next = s.claimParams(o, r, r.ProcessState, now)
		}
	} else if r, ok := o.step(rep.Step + 1); ok {
		next = s.claimParams(o, r, sas.Pending, now)
	}
	recs, err := s.cfg.Store.Complete(ctx, sas.CompleteParams{
		Key: rec.Key(), Owner: rep.LockedBy, Attempt: rep.Attempt, Now: now, Compensation: undo, Next: next,
	})
	if err != nil {
		return s.lostWrite(ctx, o, rec, rep, err, now)
	}
	var claimed *sas.StepRecord
	if next != nil && len(recs) > 1 {
		claimed = &recs[1]
	}
	s.log.InfoContext(ctx, "step done", "order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt, "compensation", undo)
	return s.afterDone(ctx, o, rep, undo, claimed, now)
}

// fail writes a permanent failure reported by the agent.
func (s *Service) fail(ctx context.Context, o order, rec sas.StepRecord, rep sas.AgentReply, undo bool, now time.Time) error {
	reason := failReason(rep)
	failed, err := s.cfg.Store.Fail(ctx, sas.FailParams{
		Key: rec.Key(), Owner: rep.LockedBy, Attempt: rep.Attempt, Now: now, Reason: reason, Compensation: undo,
	})
	if err != nil {
		return s.lostWrite(ctx, o, rec, rep, err, now)
	}
	s.log.WarnContext(ctx, "step failed", "order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt, "compensation", undo, "reason", reason)
	return s.afterFailed(ctx, o, failed, undo, now)
}

// failReason is what a failed reply's step records as its last error.
func failReason(rep sas.AgentReply) string {
	if rep.Reason == "" {
		return "the agent reported a permanent failure without a reason"
	}
	return rep.Reason
}

// lostWrite sorts out a reply whose write lost: a duplicate that another
// delivery of the same reply beat to it (repeat the side effects), or a
// reply gone stale between the read and the write (ignore).
func (s *Service) lostWrite(ctx context.Context, o order, rec sas.StepRecord, rep sas.AgentReply, err error, now time.Time) error {
	var re *sas.RaceError
	switch {
	case errors.Is(err, sas.ErrNotFound):
		return drop(err, "reply for order %s step %d", rep.OrderID, rep.Step)
	case !errors.As(err, &re):
		return fmt.Errorf("recording the reply of step %s attempt %d: %w", rec.Key(), rep.Attempt, err)
	case re.Key != rec.Key():
		// The step's write was fine but its successor could not be claimed:
		// the successor is not the fresh Pending record it must be. Nothing
		// was written; the supervisor will take the step back at its deadline
		// and give up on it, alerting an operator.
		s.log.ErrorContext(ctx, "successor cannot be claimed; reply not recorded", "order", rep.OrderID,
			"step", rep.Step, "successor", re.Key.Step, "error", err)
		return drop(err, "successor of step %s cannot be claimed", rec.Key())
	case re.Current == nil:
		s.stale(ctx, rep, rec)
		return nil
	}
	switch c, undo := classify(*re.Current, rep); c {
	case replyDoneAgain:
		s.log.InfoContext(ctx, "duplicate reply lost the race to its twin", "order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt)
		return s.afterDone(ctx, o, rep, undo, nil, now)
	case replyFailedAgain:
		s.log.InfoContext(ctx, "duplicate reply lost the race to its twin", "order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt)
		return s.afterFailed(ctx, o, *re.Current, undo, now)
	}
	s.stale(ctx, rep, *re.Current)
	return nil
}

// claimParams claims record r from state from for this instance.
func (s *Service) claimParams(o order, r sas.StepRecord, from sas.ProcessState, now time.Time) *sas.ClaimParams {
	return &sas.ClaimParams{
		Key: r.Key(), From: from, Attempt: r.Attempt, Owner: s.cfg.Owner, Now: now,
		CompleteBy: now.Add(s.timeout(o.wf.Steps[r.Step])),
	}
}

// afterDone makes the side effects of a completed step or undo. claimed is
// the successor this delivery claimed; nil on a duplicate, which re-sends
// the successor's request only while its lease runs.
func (s *Service) afterDone(ctx context.Context, o order, rep sas.AgentReply, undo bool, claimed *sas.StepRecord, now time.Time) error {
	ord, n := o.view.Order, o.n()
	if undo {
		return s.afterUndone(ctx, o, rep, claimed, now)
	}
	if rep.Step+1 < n {
		succ, ok := o.step(rep.Step + 1)
		if claimed != nil {
			succ, ok = *claimed, true
		}
		if ok && (claimed != nil || live(succ, now)) {
			if err := s.dispatch(ctx, ord, o.wf.Steps[succ.Step], succ); err != nil {
				return err
			}
		}
	}
	stepName := o.wf.Steps[rep.Step].Name
	if err := s.post(ctx, ord, sas.Status{Status: sas.StatusStepDone, Step: stepName, Sequence: SeqStepDone(rep.Step, rep.Attempt)}, now); err != nil {
		return err
	}
	if rep.Step+1 == n {
		s.log.InfoContext(ctx, "order processed", "order", ord.OrderID)
		return s.post(ctx, ord, sas.Status{Status: sas.StatusProcessed, Sequence: SeqProcessed(n)}, now)
	}
	return nil
}

// afterUndone dispatches the next undo, or posts "compensated" after the last.
func (s *Service) afterUndone(ctx context.Context, o order, rep sas.AgentReply, claimed *sas.StepRecord, now time.Time) error {
	ord := o.view.Order
	if claimed != nil {
		return s.dispatch(ctx, ord, o.wf.Steps[claimed.Step], *claimed)
	}
	if o.unread {
		// replyUnread completes an undo without reading only when no earlier
		// step has an Undo: nothing below can be left to undo.
		s.log.InfoContext(ctx, "order compensated", "order", ord.OrderID)
		return s.post(ctx, ord, sas.Status{Status: sas.StatusCompensated, Sequence: SeqCompensated(o.n())}, now)
	}
	// This delivery claimed no successor: it finished the last undo, or it
	// is a duplicate and the first delivery claimed the next one. Look below.
	for i := rep.Step - 1; i >= 0; i-- {
		r, ok := o.step(i)
		if !ok {
			continue
		}
		switch {
		case r.ProcessState == sas.Compensating:
			if live(r, now) {
				return s.dispatch(ctx, ord, o.wf.Steps[i], r)
			}
			return nil // the supervisor has it
		case r.ProcessState == sas.CompensationFailed:
			return nil // the chain stopped there; an operator was told
		case undoable(r, o.wf.Steps[i], true):
			// Left to undo but not claimed: a twin delivery claims it right
			// now (our view predates its write), or the order changed under
			// the chain. Not "compensated"; a compensate message resumes it.
			return nil
		}
	}
	s.log.InfoContext(ctx, "order compensated", "order", ord.OrderID)
	return s.post(ctx, ord, sas.Status{Status: sas.StatusCompensated, Sequence: SeqCompensated(o.n())}, now)
}

// afterFailed makes the side effects of a failed step or undo: alert, tell
// the submitter, and (for a forward step) undo the steps done before it.
func (s *Service) afterFailed(ctx context.Context, o order, r sas.StepRecord, undo bool, now time.Time) error {
	ord, n := o.view.Order, o.n()
	reason := r.LastError
	if err := s.alert(ctx, o, r, reason, now); err != nil {
		return err
	}
	stepName := o.wf.Steps[r.Step].Name
	st := sas.Status{Status: sas.StatusFailed, Step: stepName, Sequence: SeqFailed(r.Step, r.Attempt), Reason: reason}
	if undo {
		st.Sequence, st.Reason = SeqUndoFailed(n, r.Step, r.Attempt), "compensation failed: "+reason
	}
	if err := s.post(ctx, ord, st, now); err != nil {
		return err
	}
	if undo {
		return nil
	}
	if o.unread {
		if !undoBelow(o.wf, r.Step) {
			s.log.InfoContext(ctx, "nothing to compensate", "order", ord.OrderID)
			return nil
		}
		// Which earlier steps are done, and so need undoing, only their
		// records say: read them (a failure is off the hot path). The read
		// comes after the write, so it sees this step failed.
		var err error
		if o, err = s.load(ctx, o.id()); err != nil {
			return err
		}
	}
	return s.startCompensation(ctx, o, false, now)
}
