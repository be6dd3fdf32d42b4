package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/internal/metrics"
	"github.com/sas-go/sas/internal/msgctx"
	"github.com/sas-go/sas/internal/outbox"
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

// classify reads a reply against the record of its step, as a refused write
// returned it. Attempts only grow and a claim fixes its leg (forward or
// undo), so the record at the reply's attempt says what the reply is.
func classify(r sas.StepRecord, rep sas.AgentReply) replyCase {
	if r.Attempt != rep.Attempt {
		return replyStale
	}
	switch r.ProcessState {
	case sas.Processing, sas.Compensating:
		if r.LockedBy == rep.LockedBy {
			return replyApply
		}
	case sas.Processed, sas.Compensated:
		if rep.Outcome == sas.OutcomeDone {
			return replyDoneAgain
		}
	case sas.Error, sas.CompensationFailed:
		// Only a failure this holder wrote: a supervisor that gave up on the
		// same attempt alerts and asks for compensation itself.
		if rep.Outcome == sas.OutcomeFailed && r.FailedBy == rep.LockedBy {
			return replyFailedAgain
		}
	}
	return replyStale
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
	case rep.Outcome != sas.OutcomeDone && rep.Outcome != sas.OutcomeFailed && rep.Outcome != sas.OutcomeTransient && rep.Outcome != sas.OutcomeStarted:
		return &sas.ValidationError{Field: "outcome", Reason: fmt.Sprintf("%q is none of %q, %q, %q, %q", rep.Outcome, sas.OutcomeDone, sas.OutcomeFailed, sas.OutcomeTransient, sas.OutcomeStarted)}
	case rep.Workflow == "":
		return &sas.ValidationError{Field: "workflow", Reason: "required: the agent echoes the request's workflow"}
	case rep.StepName == "":
		return &sas.ValidationError{Field: "stepName", Reason: "required: the agent echoes the request's step name"}
	}
	return nil
}

// Reply handles an agent's answer for one attempt of one step or undo
// (docs/protocol.md, "agent.reply"), sending its effects at once.
func (s *Service) Reply(ctx context.Context, rep sas.AgentReply) error {
	return s.run(ctx, func(u *outbox.Unit) error { return s.reply(ctx, u, rep) })
}

// reply is the one reply path. The reply echoes its order (workflow, step
// name, payload, replyTo, leg), so the fenced write is made straight away;
// on the happy path it is the only store call. A refused write is classified
// from the record the refusal returns: a duplicate repeats the effects, a
// stale reply changes nothing (but a stale success is noted: its effect may
// exist). The order's records are read only to plan a compensation.
func (s *Service) reply(ctx context.Context, u *outbox.Unit, rep sas.AgentReply) error {
	if err := checkReply(rep); err != nil {
		return drop(err, "agent reply")
	}
	// The echo is believed only under the scheduler's signature (trust.go).
	rep, err := s.trustReply(ctx, rep)
	if err != nil {
		return err
	}
	ctx = msgctx.WithTrace(ctx, rep.Trace) // the order's, when the reply carried none
	o, err := s.replyOrder(ctx, rep)
	if err != nil {
		return err
	}
	if sas.IsElement(rep.Step) {
		return s.elementReply(ctx, u, o, rep) // fanout.go
	}
	if rep.Step < o.n() && o.wf.Steps[rep.Step].Agentless() {
		// No agent runs a callback step: only its token completes it
		// (callback.go), never a reply, signed or not; nor a wait step,
		// which its due time ends (timer.go).
		return drop(nil, "agent reply for order %s step %d: a step with no agent takes no agent reply", rep.OrderID, rep.Step)
	}
	if rep.Step < o.n() && o.wf.Steps[rep.Step].AgentToken() && !rep.Compensation && s.agentAnswered(ctx, rep) {
		return nil // its completion completes it, never its agent's answer (agenttoken.go)
	}
	return s.applyReply(ctx, u, o, rep)
}

// applyReply is a believed reply's outcome applied to its order: an
// agent's, once trusted, or a completion from outside built from its
// checked token and the stored order, read whole (callback.go).
func (s *Service) applyReply(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply) error {
	return s.apply(ctx, u, o, rep, false)
}

// apply is applyReply; elapsed makes a done outcome the end of a wait
// step, its write fenced on the due time having passed (timer.go).
func (s *Service) apply(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply, elapsed bool) error {
	if w := o.wf; rep.Step >= len(w.Steps) || w.Steps[rep.Step].Name != rep.StepName {
		// The workflow changed shape under the order: never guess a successor.
		return drop(nil, "reply for order %s: step %d of workflow %q is not %q", rep.OrderID, rep.Step, w.Name, rep.StepName)
	}
	now := s.cfg.Clock.Now()
	key := sas.StepKey{OrderID: rep.OrderID, Step: rep.Step}
	undo := rep.Compensation

	if rep.Outcome == sas.OutcomeStarted {
		// Not an outcome: the agent picked the request up late (started.go).
		return s.started(ctx, o, rep, now)
	}
	if rep.Outcome == sas.OutcomeTransient {
		// The attempt ran and failed: counted now (transient.go).
		return s.transient(ctx, u, o, rep, now)
	}
	// An agent that could not carry its step's result says so: a failure
	// whose effect happened (its undo is owed).
	// So does an agent-token step's failure, by its agent or from
	// outside: its agent was asked to start the work (agenttoken.go).
	effect := rep.Outcome == sas.OutcomeFailed && !undo &&
		(rep.ErrorType == sas.ErrorResultTooLarge || o.wf.Steps[rep.Step].AgentToken())
	if rep.Outcome == sas.OutcomeDone && !undo {
		// A result over its bounds fails its step, whose effect happened
		// (results.go): as a failed reply, so that a duplicate of it is
		// one of a failure.
		why, err := s.boundResult(ctx, &o, &rep)
		if err != nil {
			return err
		}
		if why != "" {
			s.log.WarnContext(ctx, "step result over its bound: the step fails and is undone", "order", rep.OrderID, "step", rep.Step,
				"resultBytes", len(rep.Result), "reason", why)
			rep.Outcome, rep.Reason, rep.Result, rep.Rejected, effect = sas.OutcomeFailed, why, nil, false, true
			o.steps = nil // the failure's effects read the order after its write, as any failure's
		}
	}
	if rep.Outcome == sas.OutcomeFailed {
		reason := failReason(rep)
		failed, err := s.cfg.Store.Fail(ctx, sas.FailParams{
			Key: key, Owner: rep.LockedBy, Attempt: rep.Attempt, Now: now, Reason: reason, Compensation: undo,
			Run: rep.Timing(), // for people (the console), never read back
			// A business rejection (agent.Reject): no alert, the order
			// ends Rejected. An undo cannot be rejected: its failure is.
			Rejected: rep.Rejected && !undo, Effect: effect,
		})
		if err != nil {
			return s.refused(ctx, u, o, rep, err, now)
		}
		s.log.WarnContext(ctx, "step failed", "order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt, "compensation", undo, "reason", reason)
		s.emitStep(ctx, o, rep.Step, undo, now, metrics.StepsFailed)
		return s.afterFailed(ctx, u, o, failed, undo, now)
	}

	if !undo && o.wf.Graph() {
		// Which steps start now depends on the other branches (graph.go).
		return s.doneInGraph(ctx, u, o, rep, elapsed, now)
	}
	var next *sas.ClaimParams
	if undo {
		// Which undo follows depends on the other steps' records.
		if err := s.read(ctx, &o); err != nil {
			return err
		}
		if r, ok := nextUndo(o, rep.Step); ok {
			// The completion claims the next undo in the same write: what
			// that step's failure may owe goes out first (tellBeforeClaim).
			if err := s.tellBeforeClaim(ctx, o, r, true, now); err != nil {
				return err
			}
			next = s.claimParams(o, r, r.ProcessState, now)
		}
	}
	var decided choice
	if !undo {
		// While a step runs, the steps after it have never been claimed
		// (steps run in order; an operator resubmits only a failed step,
		// whose successors never ran): the successor is Pending at attempt
		// 0, as Submit created it. The claim is fenced on that, and so is
		// the skip of each step the conditions pass over (choice.go).
		var err error
		if decided, err = s.decideAfter(ctx, &o, rep.Step, rep.Result); err != nil {
			return err
		}
		if decided.next >= 0 {
			next = s.claimParams(o, sas.StepRecord{OrderID: rep.OrderID, Step: decided.next}, sas.Pending, now)
		}
	}
	p := sas.CompleteParams{
		Key: key, Owner: rep.LockedBy, Attempt: rep.Attempt, Now: now, Compensation: undo, Next: next,
		Run:     rep.Timing(), // for people (the console), never read back
		Elapsed: elapsed,
		By:      completerOf(ctx),
	}
	if !undo {
		p.Result = rep.Result // recorded with the step, within its bounds (boundResult)
		p.Skip = decided.skips
	}
	recs, err := s.cfg.Store.Complete(ctx, p)
	if err != nil {
		return s.refused(ctx, u, o, rep, err, now)
	}
	want := 1 + len(p.Skip)
	if next != nil {
		want++
	}
	if len(recs) < want {
		// The store broke its contract. The write is made: a redelivery
		// takes the duplicate branch and dispatches the successor.
		return fmt.Errorf("completing step %s: the store returned %d records, not %d", key, len(recs), want)
	}
	var claimed *sas.StepRecord
	if next != nil {
		claimed = &recs[1]
	}
	for _, r := range recs[1:] {
		o.put(r)
	}
	if !undo {
		o.put(recs[0]) // its result, for the successor's request and the processed status
	}
	s.log.InfoContext(ctx, "step done", "order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt, "compensation", undo)
	s.emitStep(ctx, o, rep.Step, undo, now, metrics.StepsDone)
	for _, k := range p.Skip {
		s.log.InfoContext(ctx, "step not run", "order", rep.OrderID, "step", k.Step, "state", k.To(), "reason", k.Reason)
	}
	_, condFailed := decided.failed()
	if !undo && next == nil && !condFailed {
		s.emitOrder(ctx, metrics.OrdersProcessed, o.id(), o.ord.Workflow, now)
	}
	if err := s.afterDone(ctx, u, o, rep, claimed, now); err != nil {
		return err
	}
	if condFailed && !undo {
		// A condition that could not be evaluated: a permanent failure of
		// its step, written with the completion; its effects as any's.
		return s.conditionFailed(ctx, u, o, recs[len(recs)-1], now)
	}
	return nil
}

// replyOrder is the order a reply is about, from its echo (workflow,
// version, payload, replyTo, priority), so the happy path reads nothing.
// The echo is the order's own: signed by the scheduler, or, for a reply
// without a signature (an agent built before it, which sends no version
// either), replaced by the stored order in trustReply. So an order's
// version always comes from the order, never from the deployment
// (docs/workflows.md, "Versions").
func (s *Service) replyOrder(ctx context.Context, rep sas.AgentReply) (order, error) {
	w, err := s.workflow(ctx, rep.Workflow, rep.Version)
	if err != nil {
		return order{}, fmt.Errorf("reply for order %s: %w", rep.OrderID, err)
	}
	return order{
		ord: sas.Order{OrderID: rep.OrderID, Workflow: w.Name, Payload: rep.Payload, ReplyTo: rep.ReplyTo, Steps: w.StepNames(), After: w.After(),
			Priority: rep.Priority, Version: rep.Version, Trace: rep.Trace},
		wf: w,
	}, nil
}

// refused sorts out a reply whose write was refused, from the record the
// refusal returned.
func (s *Service) refused(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply, err error, now time.Time) error {
	key := sas.StepKey{OrderID: rep.OrderID, Step: rep.Step}
	var re *sas.RaceError
	switch {
	case errors.Is(err, sas.ErrNotFound):
		return drop(err, "reply for order %s step %d", rep.OrderID, rep.Step)
	case !errors.As(err, &re):
		return fmt.Errorf("recording the reply of step %s attempt %d: %w", key, rep.Attempt, err)
	case re.Key != key:
		// The step's write was fine but its successor could not be claimed:
		// it is not the fresh Pending record it must be. Nothing was
		// written; the supervisor takes the step back at its deadline and,
		// if it keeps happening, gives up and alerts an operator.
		s.log.ErrorContext(ctx, "successor cannot be claimed; reply not recorded", "order", rep.OrderID,
			"step", rep.Step, "successor", re.Key.Step, "err", err)
		return drop(err, "successor of step %s cannot be claimed", key)
	case re.Current == nil:
		s.log.InfoContext(ctx, "stale reply ignored", "order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt)
		return nil
	}
	cur := *re.Current
	o.put(cur) // as the store has it now (a duplicate's successor needs its result)
	if cur.Cancelled && !rep.Compensation && rep.Outcome == sas.OutcomeDone && cur.Attempt == rep.Attempt {
		switch {
		case heldFor(cur, rep):
			// Refused by the cancel's mark: the step settled, and its
			// order was cancelled meanwhile (cancel.go).
			return s.cancelledDone(ctx, u, o, rep, now)
		case cur.ProcessState == sas.Processed:
			// A duplicate of that success: its first delivery may have
			// stopped before the compensation started.
			if err := s.read(ctx, &o); err != nil {
				return err
			}
			return s.afterCancel(ctx, u, o, now)
		}
	}
	if cur.Cancelled && (!rep.Compensation || rep.Sig == "") && rep.Outcome == sas.OutcomeDone && cur.Attempt == rep.Attempt+1 &&
		cur.ProcessState == sas.Compensating && s.resend(ctx, cur, now) {
		// This success's own delivery completed the cancelled step and
		// claimed its undo (cancelledDone: the newest step to undo is its
		// own), and may have died before sending it: its redelivery sends it
		// again, as for a failure's (the simulator's seeds 47 and, from an
		// agent that does not sign, 2981: an unsigned reply's leg is read
		// from the record, trustReply, Compensating by now).
		s.log.InfoContext(ctx, "redelivered success of a cancelled step: re-sending its undo", "order", rep.OrderID, "step", rep.Step, "attempt", cur.Attempt)
		s.dispatch(ctx, u, o, o.wf.Steps[cur.Step], cur)
		return nil
	}
	switch classify(cur, rep) {
	case replyDoneAgain:
		s.log.InfoContext(ctx, "duplicate reply: step already done", "order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt, "compensation", rep.Compensation)
		return s.duplicateDone(ctx, u, o, rep, now)
	case replyFailedAgain:
		s.log.InfoContext(ctx, "duplicate reply: step already failed", "order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt, "compensation", rep.Compensation)
		return s.afterFailed(ctx, u, o, cur, rep.Compensation, now)
	case replyApply:
		// The write lost although the record is held by this very attempt:
		// only a reply that echoes the wrong leg (forward or undo) does that.
		return drop(err, "reply for step %s attempt %d says compensation=%t but the step is %s",
			key, rep.Attempt, rep.Compensation, cur.ProcessState)
	}
	s.log.InfoContext(ctx, "stale reply ignored", "order", rep.OrderID, "step", rep.Step,
		"attempt", rep.Attempt, "lockedBy", rep.LockedBy, "outcome", rep.Outcome,
		"state", cur.ProcessState, "currentAttempt", cur.Attempt, "currentHolder", cur.LockedBy)
	if cur.ProcessState == sas.Compensating && cur.Attempt == rep.Attempt+1 && s.resend(ctx, cur, now) {
		// This success's own delivery may have failed the next step by its
		// condition and claimed this step's undo (conditionFailed), or,
		// arriving after the step's failure (a late success, whose effect
		// it noted: UndoOwed), started the compensation with this step's
		// undo (lateSuccess; the simulator's deep sweep seed 30880), and
		// died before sending it: its redelivery sends it again, as for a
		// failure below.
		failedNext, err := s.doneFailedItsSuccessor(ctx, &o, rep)
		if err != nil {
			return err // redelivered: the read is tried again
		}
		if failedNext || (rep.Outcome == sas.OutcomeDone && !rep.Compensation && cur.UndoOwed) {
			s.dispatch(ctx, u, o, o.wf.Steps[cur.Step], cur)
			return nil
		}
	}
	if rep.Outcome == sas.OutcomeDone && !rep.Compensation && lateFor(cur, rep) && !o.wf.Steps[rep.Step].Outside() {
		// (A completion from outside that lost its race is late: it
		// changes nothing, callback.go. Its step is undone if it failed
		// or was given up: an agent-token step's agent ran, and owes its
		// undo then, agenttoken.go.)
		return s.lateSuccess(ctx, u, o, rep, cur, now)
	}
	if rep.Outcome == sas.OutcomeFailed && cur.ProcessState == sas.Compensating &&
		cur.Attempt == rep.Attempt+1 && s.resend(ctx, cur, now) {
		// The failure's own delivery claimed the step's undo (afterFailed
		// undoes the failed step too) and may have died before sending it:
		// its redelivery sends it again, as startCompensation does. Not
		// fenced on the reply's leg: an unsigned reply's is read from the
		// record (trustReply), Compensating by now, and a re-sent request
		// costs a call at most.
		s.dispatch(ctx, u, o, o.wf.Steps[cur.Step], cur)
	}
	return nil
}

// doneFailedItsSuccessor reports whether rep is a forward success whose own
// completion failed the step after it by its condition (choice.go) and so
// claimed its step's undo in the same handling (conditionFailed): like a
// failure's, its redelivery sends that undo again while no pick-up was
// reported (the simulator's seed 59, choices beside deadlines from
// pick-up); in a graph, any forward success (see below). It reads the order
// only for a straight line's reply whose next step has a condition.
// A read that fails is returned, for the message to be redelivered: the
// message is the undo's only trigger left (the simulator's seed 3987, a
// store outage at that read).
func (s *Service) doneFailedItsSuccessor(ctx context.Context, o *order, rep sas.AgentReply) (bool, error) {
	// Not fenced on the reply's leg, as for a failure: an unsigned reply's
	// is read from the record (trustReply), Compensating by now.
	if rep.Outcome == sas.OutcomeDone && o.wf.Graph() {
		// In a graph, the completion of a step while another branch had
		// failed starts the compensation once the order settled
		// (undoOnceSettled), whose first undo may be this step's own (the
		// simulator's seed 851, the undo never sent when its delivery
		// failed; seed 7551, the same with an unsigned reply, whose leg
		// reads as the undo's). Read nothing: a redelivery sends that undo
		// again.
		return true, nil
	}
	if rep.Outcome != sas.OutcomeDone || rep.Step+1 >= o.n() {
		return false, nil
	}
	if next := o.wf.Steps[rep.Step+1]; next.When == "" && next.ForEach == nil {
		return false, nil
	}
	if err := s.read(ctx, o); err != nil {
		return false, err
	}
	// So does a fan-out after it that failed at its start, in the same
	// handling: its list could not be evaluated, or a cancel had marked it
	// (fanout.go's startFailed).
	succ, ok := o.step(ranAfter(*o, rep.Step))
	return ok && ((succ.ProcessState == sas.Error && succ.FailedBy == sas.ByCondition) ||
		startFailed(o.wf.Steps[succ.Step], succ)), nil
}

// lateFor reports whether a stale reply is for an attempt the step really
// had: an earlier one, or the current one after it lost its lease (rescued
// back to Pending, or failed by another delivery). A reply naming a later
// attempt, or the current lease with another holder, was never sent by an
// agent holding the step, and notes nothing.
func lateFor(cur sas.StepRecord, rep sas.AgentReply) bool {
	return rep.Attempt < cur.Attempt || (rep.Attempt == cur.Attempt && !cur.ProcessState.Leased())
}

// lateSuccess handles a forward step's done reply for an attempt that no
// longer holds the step. Whatever became of the step, the remote may have
// made the effect: a step in flight or in Error is marked UndoOwed, so a
// compensation of its order undoes it, and a step that ended in Error has
// its order's compensation (re)started to do so. A remote that declined a
// first call without storing the outcome and succeeded on a second with the
// same key is how this happens (docs/protocol.md, "Idempotency keys").
func (s *Service) lateSuccess(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply, cur sas.StepRecord, now time.Time) error {
	if rep.Generation < cur.Generation {
		// An operator resubmitted the step under a new key since this
		// attempt: its effect is one beside the step's own. An undo of the
		// step undoes every generation's key (AgentRequest.PriorKeys), but
		// an order that completes is not undone: an operator is told
		// (docs/protocol.md, "Idempotency keys"). A reply without the field
		// (an older agent) reads as generation 0: told too.
		reason := fmt.Sprintf("a success for attempt %d of step %d (%s) arrived under its generation %d key (%s) after the step was resubmitted as generation %d: "+
			"an effect exists under each; if the order completes, undo the older one by hand",
			rep.Attempt, rep.Step, rep.StepName, rep.Generation, sas.IdempotencyKey(rep.OrderID, rep.Step, rep.Generation, false), cur.Generation)
		s.log.ErrorContext(ctx, "success under an older generation", "order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt, "generation", rep.Generation)
		// One event per older key, whichever attempt or delivery reports it.
		s.alert(u, o, cur, fmt.Sprintf("%s/stale/g%d", cur.Key(), rep.Generation), reason, now)
	}
	switch cur.ProcessState {
	case sas.Pending, sas.Processing, sas.Error:
	case sas.Compensated, sas.CompensationFailed:
		// The undo was sent for every key the step has had (PriorKeys):
		// done before it, the undo reversed this effect; reaching the
		// remote after, the undo cancelled it (an undo commutes with what it
		// undoes: docs/protocol.md, "Idempotency keys"). A failed undo was
		// alerted. A success under an older key was told above.
		s.log.InfoContext(ctx, "late success of an undone step: its undo covers it", "order", rep.OrderID,
			"step", rep.Step, "attempt", rep.Attempt, "state", cur.ProcessState)
		return nil
	default:
		return nil // Processed: the same key's effect, undone with it; Compensating: its undo is running
	}
	noted, err := s.cfg.Store.NoteEffect(ctx, sas.NoteEffectParams{
		Key: cur.Key(), State: cur.ProcessState, Now: now, Actor: s.cfg.Owner, Attempt: rep.Attempt,
	})
	if err != nil {
		// The step moved meanwhile: the redelivery looks again.
		return fmt.Errorf("noting the effect of step %s: %w", cur.Key(), err)
	}
	s.log.WarnContext(ctx, "late success noted: the step's effect may exist", "order", rep.OrderID, "step", rep.Step,
		"attempt", rep.Attempt, "state", noted.ProcessState)
	if noted.ProcessState != sas.Error {
		return nil // still in flight: it ends Processed, or its compensation finds UndoOwed
	}
	if err := s.read(ctx, &o); err != nil {
		return err
	}
	_, err = s.startCompensation(ctx, u, o, false, now)
	return err
}

// claimParams claims record r from state from for this instance.
func (s *Service) claimParams(o order, r sas.StepRecord, from sas.ProcessState, now time.Time) *sas.ClaimParams {
	return &sas.ClaimParams{
		Key: r.Key(), From: from, Attempt: r.Attempt, Owner: s.cfg.Owner, Now: now,
		CompleteBy: s.leaseEnd(o.def(r.Step), from != sas.Pending, 0, now),
	}
}

// failReason is what a failed reply's step records as its last error.
func failReason(rep sas.AgentReply) string {
	if rep.Reason == "" {
		return "the agent reported a permanent failure without a reason"
	}
	return rep.Reason
}

// afterDone makes the effects of a completed step or undo: the successor's
// request (claimed in the same write) and the statuses.
func (s *Service) afterDone(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply, claimed *sas.StepRecord, now time.Time) error {
	if rep.Compensation {
		return s.afterUndone(ctx, u, o, rep, claimed, now)
	}
	if claimed != nil {
		s.dispatch(ctx, u, o, o.wf.Steps[claimed.Step], *claimed)
	}
	s.stepDone(ctx, u, o, rep, now)
	return nil
}

func (s *Service) stepDone(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply, now time.Time) {
	n := o.n()
	if rep.Generation > 0 {
		// A step resubmitted after a refusal ran under a new key, and a
		// refusal is not proof of no effect: a twin delivery of the
		// refused request may have succeeded under the older key, its reply
		// lost. The order completes with both effects then, and nothing
		// undoes the older one: an operator is told, once per generation
		// (docs/decisions.md, "A resubmit after a refusal takes a new key,
		// and says so").
		rec := sas.StepRecord{OrderID: rep.OrderID, Step: rep.Step, StepName: o.wf.Steps[rep.Step].Name,
			ProcessState: sas.Processed, Attempt: rep.Attempt, Generation: rep.Generation}
		s.alert(u, o, rec, fmt.Sprintf("%s/regen/g%d", rec.Key(), rep.Generation), sas.ResubmitKeyNote(rep.OrderID, rep.Step, rep.Generation), now)
	}
	s.post(ctx, u, o.ord, sas.Status{Status: sas.StatusStepDone, Step: o.wf.Steps[rep.Step].Name, Sequence: SeqStepDone(rep.Step, rep.Attempt)}, now)
	// What its completion skipped (choice.go); the order is processed by
	// its last step, or by one after which every step was skipped (in a
	// graph: once every step is Processed or Skipped).
	s.postSkipped(ctx, u, o, skippedBy(o, rep.Step), now)
	if o.allDone(rep.Step) {
		s.log.InfoContext(ctx, "order processed", "order", o.id())
		st := sas.Status{Status: sas.StatusProcessed, Sequence: SeqProcessed(n)}
		// What the steps returned: from the records read or written here,
		// else read (a duplicate reply's redelivery).
		results, err := s.resultsFor(ctx, &o, n, false)
		if err != nil {
			s.log.ErrorContext(ctx, "processed status sent without the results: they could not be read", "order", o.id(), "err", err)
		}
		st.Results = results
		s.post(ctx, u, o.ord, st, now)
	}
}

// duplicateDone repeats the effects of a success that another delivery of
// the same reply recorded: its first delivery may have stopped between the
// write and the sends (a crash, a failed send). The successor that write
// claimed gets its request again while its lease runs, whoever holds it.
func (s *Service) duplicateDone(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply, now time.Time) error {
	if rep.Compensation {
		if err := s.read(ctx, &o); err != nil {
			return err
		}
		return s.afterUndone(ctx, u, o, rep, nil, now)
	}
	if err := s.emptyFanOutsAgain(ctx, u, o, rep.Step); err != nil { // fanout.go
		return err
	}
	if o.wf.Graph() {
		return s.duplicateDoneInGraph(ctx, u, o, rep, now)
	}
	if rep.Step+1 < o.n() && o.wf.Steps[rep.Step+1].When != "" {
		// The completion may have skipped steps (choice.go): which one it
		// claimed, or failed, the order's records say.
		if err := s.read(ctx, &o); err != nil {
			return err
		}
		succ, ok := o.step(ranAfter(o, rep.Step))
		if ok && s.resend(ctx, succ, now) && succ.ProcessState == sas.Processing {
			s.dispatch(ctx, u, o, o.wf.Steps[succ.Step], succ)
		}
		if ok {
			if err := s.resendStopped(ctx, u, o, succ, now); err != nil { // fanout.go
				return err
			}
		}
		s.stepDone(ctx, u, o, rep, now)
		if ok && succ.ProcessState == sas.Error && succ.FailedBy == sas.ByCondition {
			return s.conditionFailed(ctx, u, o, succ, now)
		}
		return nil
	}
	if rep.Step+1 < o.n() {
		succ, err := s.cfg.Store.GetStep(ctx, sas.StepKey{OrderID: rep.OrderID, Step: rep.Step + 1})
		if err != nil {
			return fmt.Errorf("reading the successor of step %s/%d: %w", rep.OrderID, rep.Step, err)
		}
		if s.resend(ctx, succ, now) && succ.ProcessState == sas.Processing {
			s.dispatch(ctx, u, o, o.wf.Steps[succ.Step], succ)
		}
		if err := s.resendStopped(ctx, u, o, succ, now); err != nil { // fanout.go
			return err
		}
	}
	s.stepDone(ctx, u, o, rep, now)
	return nil
}

// afterUndone dispatches the next undo, or posts "compensated" after the
// last. o's records were read before the completion was written.
func (s *Service) afterUndone(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply, claimed *sas.StepRecord, now time.Time) error {
	if claimed != nil {
		s.dispatch(ctx, u, o, o.wf.Steps[claimed.Step], *claimed)
		return nil
	}
	// No successor claimed by this delivery: it finished the last undo, or
	// it is a duplicate and the first delivery claimed the next one. Read
	// again: the view the completion was planned on predates its write, and
	// a late success may have marked a step owed its undo since. Finishing
	// a compensation claims any step still owing one.
	if err := s.read(ctx, &o); err != nil {
		return err
	}
	for _, i := range undoOrder(o) {
		r, ok := o.step(i)
		if !ok || i == rep.Step {
			continue
		}
		switch {
		case r.ProcessState == sas.Compensating:
			if s.resend(ctx, r, now) {
				s.dispatch(ctx, u, o, o.wf.Steps[i], r)
			}
			return nil // running, or the supervisor has it
		case r.ProcessState == sas.CompensationFailed:
			return nil // the chain stopped there; an operator was told
		case undoable(r, o.wf.Steps[i], true):
			// Left to undo but not claimed: a late success marked it owed,
			// or a twin delivery is claiming it right now (then our claim
			// loses, and the twin dispatches it).
			_, err := s.claimUndo(ctx, u, o, r, false, now)
			return err
		}
	}
	end := ending(o)
	s.log.InfoContext(ctx, "order compensated", "order", o.id(), "status", end.Status)
	s.emitOrder(ctx, metrics.CompensationsFinished, o.id(), o.ord.Workflow, now)
	if end.Status == sas.StatusRejected {
		s.emitOrder(ctx, metrics.OrdersRejected, o.id(), o.ord.Workflow, now)
	}
	s.post(ctx, u, o.ord, end, now)
	return nil
}

// afterFailed makes the effects of a failed step or undo: alert, tell the
// submitter, and (for a forward step) undo what was done, the failed step
// included (undoable). When the compensation claims the failed step's own
// undo, that claim has delivered its alert and status already
// (tellBeforeClaim); else they go with the unit.
func (s *Service) afterFailed(ctx context.Context, u *outbox.Unit, o order, r sas.StepRecord, undo bool, now time.Time) error {
	reason := r.LastError
	tell := func() {
		if (r.Rejected || r.Cancelled) && !undo {
			return // a business outcome or a cancelled order: no operator is paged; its order's end tells the submitter
		}
		s.alert(u, o, r, sas.AlertID(r.Key(), r.ProcessState, r.Attempt), reason, now)
		st := sas.Status{Status: sas.StatusFailed, Step: o.wf.Steps[r.Step].Name, Sequence: SeqFailed(r.Step, r.Attempt), Reason: reason}
		if undo {
			st.Sequence, st.Reason = SeqUndoFailed(o.n(), r.Step, r.Attempt), "compensation failed: "+reason
		}
		s.post(ctx, u, o.ord, st, now)
	}
	if undo {
		tell()
		return nil
	}
	if o.steps == nil {
		if !o.wf.Graph() && !undoBelow(o.wf, r.Step) && o.wf.Steps[r.Step].Undo == "" {
			s.log.InfoContext(ctx, "nothing to compensate", "order", o.id())
			tell()
			switch {
			case r.Cancelled: // o holds no steps: the status is built from r
				s.post(ctx, u, o.ord, cancelledAt(o, r.Step), now)
			case r.Rejected:
				s.rejectedAlone(ctx, u, o, r, now)
			}
			return nil
		}
		// Which steps are done, and so need undoing, only their records
		// say. The read comes after the write, so it sees this step failed.
		if err := s.read(ctx, &o); err != nil {
			return err
		}
	}
	return s.compensateThenTell(ctx, u, o, r.Key(), now, func() error { tell(); return nil })
}

// compensateThenTell starts the compensation of o, whose step failed (a
// failure or a give-up), and then runs tell, which delivers what the failure
// owes (its alert and failed status), unless the compensation began with
// failed's own undo: that claim delivered them first (tellBeforeClaim).
func (s *Service) compensateThenTell(ctx context.Context, u *outbox.Unit, o order, failed sas.StepKey, now time.Time, tell func() error) error {
	claimed, err := s.startCompensation(ctx, u, o, false, now)
	if err != nil || claimed == failed {
		return err
	}
	return tell()
}

// undoBelow reports whether a step before step has an Undo: only then can a
// compensation have anything to do below it.
func undoBelow(w sas.Workflow, step int) bool {
	for _, d := range w.Steps[:min(step, len(w.Steps))] {
		if d.Undo != "" {
			return true
		}
	}
	return false
}
