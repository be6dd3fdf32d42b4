package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/internal/metrics"
	"github.com/sas-go/sas/internal/msgctx"
	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
)

// Cancellation (docs/protocol.md, "Cancellation"). A cancel lands on each
// of the order's steps in flight or ready (sas.CancelTargets: several when
// branches run at once), one fenced write each (sas.CancelStep): a step
// ready to be claimed is turned away at once (to Error, marked); a step in
// flight is marked and let to settle. Its holder's completion is refused
// by the mark, so the reply that settles it finds out and completes the
// step without a successor (cancelledDone); its failure or transient
// outcome fails it (no next attempt). A completion of a branch planned
// before a mark is fenced on it (sas.StepSeen) and claims nothing. When
// the last step in flight has settled, the compensation undoes what took
// effect, newest first, as after a branch's failure. Nobody is paged; the
// submitter gets "cancelled" when nothing is left to undo.

// Cancel handles a cancel from an order's submitter (intake queue) or an
// operator (control queue), sending its effects at once.
func (s *Service) Cancel(ctx context.Context, from Origin, m sas.Cancel) error {
	return s.run(ctx, func(u *outbox.Unit) error { return s.cancel(ctx, u, from, m) })
}

// decodeCancel reads a cancel message, refusing unknown fields as intake
// does (a submitter's message is held to intake's rules).
func decodeCancel(body []byte) (sas.Cancel, error) {
	var m sas.Cancel
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, &sas.ValidationError{Reason: "malformed cancel message: " + err.Error()}
	}
	switch {
	case m.V != sas.MessageVersion:
		return m, &sas.ValidationError{Field: "v", Reason: fmt.Sprintf("unsupported message version %d (this deployment reads %d)", m.V, sas.MessageVersion)}
	case !sas.ValidOrderID(m.OrderID):
		return m, &sas.ValidationError{Field: "orderId", Reason: "missing or malformed"}
	}
	m.Reason = sas.BoundReason(m.Reason)
	return m, nil
}

func (s *Service) cancel(ctx context.Context, u *outbox.Unit, from Origin, m sas.Cancel) error {
	o, err := s.load(ctx, m.OrderID)
	if err != nil {
		return err
	}
	o.ord.Trace = sas.OrderTrace(o.ord.Trace, m.Trace)
	ctx = msgctx.WithTrace(ctx, o.ord.Trace)
	who := actor(from)
	if from.Source == FromIntake {
		// A submitter reaches its own orders only (docs/trust.md,
		// "Submitters"): the order's recorded submitter, exactly. An order
		// stored without one (a queue that does not say, an order from
		// before submitters) is cancelled only by a sender the queue does
		// not name either.
		submitter := sas.SubmitterOf(from.SenderID)
		if o.ord.Submitter != submitter {
			s.log.WarnContext(ctx, "cancel refused: the order is another submitter's", "order", m.OrderID,
				"submitter", submitter, "ownedBy", o.ord.Submitter)
			return drop(nil, "cancel of order %s from %q: the order is not its own", m.OrderID, submitter)
		}
		who = "submitter:" + submitter
		if submitter == "" {
			who = "submitter:unknown"
		}
	}
	now := s.cfg.Clock.Now()
	s.log.InfoContext(ctx, "cancel requested", "order", m.OrderID, "requestedBy", who, "declaredActor", m.Actor, "reason", m.Reason)
	for tries := 1; ; tries++ {
		targets, err := sas.CancelTargets(sas.OrderView{Order: o.ord, Steps: o.steps})
		if errors.Is(err, sas.ErrNotRunning) {
			s.log.InfoContext(ctx, "cancel refused", "order", m.OrderID, "reason", err.Error())
			s.post(ctx, u, o.ord, sas.Status{Status: sas.StatusCancelRefused, Reason: err.Error(), Sequence: SeqCancelRefused(o.n())}, now)
			return drop(err, "cancel")
		}
		if err != nil {
			return err
		}
		moved, err := s.mark(ctx, &o, sas.Unmarked(targets), who, m.Reason, now)
		if err != nil {
			return err
		}
		if !moved {
			break // every step in flight is marked (a repeat finds them so): its effects
		}
		if tries == 3 {
			return fmt.Errorf("cancelling order %s: its steps kept moving while they were marked", m.OrderID)
		}
		// A step moved between the read and its mark (it completed and
		// claimed what follows, or a claim took it): read and mark again.
		if err := s.read(ctx, &o); err != nil {
			return err
		}
	}
	fanOuts := false
	for _, r := range o.steps {
		if r.ProcessState == sas.Processing && r.ForEachCount > 0 && r.Cancelled {
			// A running fan-out: its elements in flight are marked as
			// its step is, and it settles once they have (fanoutstop.go).
			fanOuts = true
			if err := s.fanOutSettled(ctx, u, o, r.Key(), now); err != nil {
				return err
			}
		}
	}
	if fanOuts {
		o.steps = nil // read again: a fan-out settled may have moved the order on
	}
	return s.afterCancel(ctx, u, o, now)
}

// mark marks each of the order's steps in flight that a cancel lands on
// (sas.CancelStep, one fenced write each), so that none of them starts a
// step after it or gets a next attempt. Of several branches in flight, the
// first mark is the cancel's moment: a sibling's completion planned before
// it is fenced on the marks as read (sas.StepSeen) and plans again, finding
// the order cancelled, so it claims nothing. It reports whether a step
// moved before its mark (the caller reads the order and marks again).
func (s *Service) mark(ctx context.Context, o *order, targets []sas.StepRecord, who, reason string, now time.Time) (bool, error) {
	moved := false
	for _, target := range targets {
		p := sas.CancelParams{Key: target.Key(), From: target.ProcessState, Attempt: target.Attempt, Now: now, Actor: who, Reason: reason}
		marked, err := s.cfg.Store.Cancel(ctx, p)
		if own, ok := sas.OwnWrite(err, who, now, cancelTo(p.From), p.Attempt); ok {
			marked, err = own, nil // committed; its retry lost to it
		}
		if errors.Is(err, sas.ErrLostRace) {
			moved = true
			continue
		}
		if err != nil {
			return false, fmt.Errorf("cancelling order %s at step %s: %w", o.id(), target.Key(), err)
		}
		o.put(marked)
		s.log.InfoContext(ctx, "cancel recorded", "order", o.id(), "step", marked.Step, "state", marked.ProcessState, "attempt", marked.Attempt)
	}
	return moved, nil
}

// cancelTo is the state a cancel leaves a step in (sas.CancelStep).
func cancelTo(from sas.ProcessState) sas.ProcessState {
	if from == sas.Pending {
		return sas.Error
	}
	return from
}

// afterCancel acts on a cancelled order as o shows it: a step in flight is
// let to settle (its reply, or the supervisor at its deadline, takes the
// cancel on); a marked step handed back ready (the supervisor rescued it)
// is turned away; then what took effect is undone, newest first, or, with
// nothing to undo, the submitter is told. It needs every step's record: a
// reply's handler reads only the order (results.go), so the order is read
// here when its steps were not (simulator seed 1180: a handed-back step
// turned away by its attempt's transient reply planned no undo, and the
// order stood Cancelled with its submitter never told).
func (s *Service) afterCancel(ctx context.Context, u *outbox.Unit, o order, now time.Time) error {
	if o.steps == nil {
		if err := s.read(ctx, &o); err != nil {
			return err
		}
	}
	// What the cancel ends at once first (each goes on here when done):
	// a marked callback or wait step's wait, a step handed back ready,
	// marked or not. An unmarked one is a branch the cancel's handler has
	// yet to reach (it marks one step at a time): this handler, which read
	// it ready, turns it away itself rather than leave the undos to that
	// handler, whose read may show this handler's own step still in flight
	// (the deep sweep's seed 53403: each left them to the other, and
	// nothing was undone). Of the two turn-away writes one wins; the other
	// reads again and goes on, and the undos' claims are fenced.
	for _, r := range o.steps {
		switch {
		case r.ProcessState == sas.Processing && r.Cancelled && o.wf.Steps[r.Step].Agentless():
			return s.endCancelledWait(ctx, u, o, r, now)
		case r.ProcessState == sas.Pending && r.LockedBy == "" && (r.Cancelled || r.InFlight()):
			return s.turnAway(ctx, u, o, r, now)
		}
	}
	// Then the steps in flight settle (several branches, each on its own
	// reply or at its deadline), and the last to settle starts the undos:
	// the branches' rule.
	return s.undoIfSettled(ctx, u, o, now)
}

// afterCancelReread reads the order's steps again and goes on with the
// cancellation (afterCancel), after a write of it lost to another's.
func (s *Service) afterCancelReread(ctx context.Context, u *outbox.Unit, o order, now time.Time) error {
	if err := s.read(ctx, &o); err != nil {
		return err
	}
	return s.afterCancel(ctx, u, o, now)
}

// endCancelledWait ends the wait of a cancelled order's callback or wait
// step (sas.StepDef.Agentless). No agent holds it and nothing of it runs
// that could settle it by itself, so the cancel does not wait for its
// completion, its timeout or its due time (days, perhaps):
// the holder's own failure write ends it (Processing → Error, fenced on
// holder and attempt; the mark kept), so its token completes nothing after
// (a late completion is logged and changes nothing, callback.go), and the
// cancellation goes on (afterCancel) as after any failure of a marked
// step: no page, what took effect undone, the submitter told.
func (s *Service) endCancelledWait(ctx context.Context, u *outbox.Unit, o order, r sas.StepRecord, now time.Time) error {
	failed, err := s.cfg.Store.Fail(ctx, sas.FailParams{
		Key: r.Key(), Owner: r.LockedBy, Attempt: r.Attempt, Now: now,
		Reason: "the order was cancelled while the step waited for its completion: the wait ends, and its token completes nothing",
	})
	if own, ok := sas.OwnWrite(err, r.LockedBy, now, sas.Error, r.Attempt); ok {
		failed, err = own, nil // committed; its retry lost to it
	}
	if errors.Is(err, sas.ErrLostRace) {
		// A completion, the supervisor at the deadline, or another
		// handler of this cancel moved it first. Whoever did may have read
		// this handler's own step still in flight and left the undos to
		// it (deep sweep seed 13298), so read again and go on: if all has
		// settled the undos start here; their claims are fenced, so two
		// handlers that both start them start them once.
		s.log.InfoContext(ctx, "cancelled callback step moved meanwhile: reading the order again", "order", o.id(), "step", r.Step, "err", err)
		return s.afterCancelReread(ctx, u, o, now)
	}
	if err != nil {
		return fmt.Errorf("ending the wait of cancelled step %s: %w", r.Key(), err)
	}
	s.log.InfoContext(ctx, "cancelled order's callback step: its wait ends", "order", o.id(), "step", r.Step, "attempt", r.Attempt)
	s.emitStep(ctx, o, r.Step, false, now, metrics.StepsFailed)
	o.put(failed)
	return s.afterCancel(ctx, u, o, now) // another branch's wait, then the undos (no page: the step is marked)
}

// turnAway moves a marked step that is ready to be claimed to Error (the
// cancel's write from Pending), so it never starts again, and goes on with
// the cancellation.
func (s *Service) turnAway(ctx context.Context, u *outbox.Unit, o order, r sas.StepRecord, now time.Time) error {
	p := sas.CancelParams{Key: r.Key(), From: sas.Pending, Attempt: r.Attempt, Now: now, Actor: s.cfg.Owner, Reason: "the step was cancelled in flight and handed back"}
	got, err := s.cfg.Store.Cancel(ctx, p)
	if own, ok := sas.OwnWrite(err, s.cfg.Owner, now, sas.Error, r.Attempt); ok {
		got, err = own, nil
	}
	if errors.Is(err, sas.ErrLostRace) {
		s.log.InfoContext(ctx, "cancelled step moved meanwhile: reading the order again", "order", o.id(), "step", r.Step, "err", err)
		return s.afterCancelReread(ctx, u, o, now) // as endCancelledWait's
	}
	if err != nil {
		return fmt.Errorf("turning away cancelled step %s: %w", r.Key(), err)
	}
	if sas.IsElement(got.Step) {
		return s.fanOutSettled(ctx, u, o, fanOutKey(got.OrderID, got.Step), now) // fanoutstop.go
	}
	o.put(got)
	return s.afterCancel(ctx, u, o, now)
}

// cancelledDone completes a marked step whose holder's success was refused
// by the mark: the step is Processed (its result recorded, for its undo)
// with no successor claimed, and the order's compensation starts.
func (s *Service) cancelledDone(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply, now time.Time) error {
	key := sas.StepKey{OrderID: rep.OrderID, Step: rep.Step}
	recs, err := s.cfg.Store.Complete(ctx, sas.CompleteParams{
		Key: key, Owner: rep.LockedBy, Attempt: rep.Attempt, Now: now, Result: rep.Result, Run: rep.Timing(), Cancelled: true,
	})
	if err != nil {
		var re *sas.RaceError
		if errors.As(err, &re) && re.Current != nil && heldFor(*re.Current, rep) {
			// Refused although held: not a race this write can win. The
			// redelivery tries again.
			return fmt.Errorf("completing cancelled step %s: %w", key, err)
		}
		return s.refused(ctx, u, o, rep, err, now)
	}
	s.log.InfoContext(ctx, "step done after its order was cancelled: no successor; undoing", "order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt)
	s.emitStep(ctx, o, rep.Step, false, now, metrics.StepsDone)
	o.put(recs[0])
	s.post(ctx, u, o.ord, sas.Status{Status: sas.StatusStepDone, Step: o.wf.Steps[rep.Step].Name, Sequence: SeqStepDone(rep.Step, rep.Attempt)}, now)
	if err := s.read(ctx, &o); err != nil {
		return err
	}
	return s.afterCancel(ctx, u, o, now)
}

// heldFor reports whether r is a forward step held by rep's attempt.
func heldFor(r sas.StepRecord, rep sas.AgentReply) bool {
	return r.ProcessState == sas.Processing && r.LockedBy == rep.LockedBy && r.Attempt == rep.Attempt
}

// cancelledTransient fails a marked step whose attempt its agent reported
// transient: a cancelled step gets no next attempt. The failure's own
// effects follow (the compensation; no page: the step is marked).
func (s *Service) cancelledTransient(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply, cur sas.StepRecord, now time.Time) (*sas.StepRecord, error) {
	failed, err := s.cfg.Store.Fail(ctx, sas.FailParams{
		Key: cur.Key(), Owner: rep.LockedBy, Attempt: rep.Attempt, Now: now, Run: rep.Timing(),
		Reason: fmt.Sprintf("attempt %d failed after its order was cancelled: %s (no next attempt)", rep.Attempt, transientWhy(rep)),
	})
	if err != nil {
		var re *sas.RaceError
		if errors.As(err, &re) && re.Current != nil {
			return re.Current, nil // look again from where it went
		}
		return nil, fmt.Errorf("failing cancelled step %s: %w", cur.Key(), err)
	}
	s.emitStep(ctx, o, rep.Step, false, now, metrics.StepsFailed)
	return nil, s.cancelledFailed(ctx, u, o, failed, now)
}

// cancelledFailed goes on with the cancellation after cancelled step (or
// element) failed was failed by its attempt's outcome: its fan-out
// settles, or the order's undos follow (no page: the step is marked).
func (s *Service) cancelledFailed(ctx context.Context, u *outbox.Unit, o order, failed sas.StepRecord, now time.Time) error {
	if sas.IsElement(failed.Step) {
		return s.fanOutSettled(ctx, u, o, fanOutKey(failed.OrderID, failed.Step), now) // fanoutstop.go
	}
	if o.wf.Graph() {
		// Branches: a sibling's wait, or a sibling handed back ready, is
		// the cancel's to end, and this handler ends it if it reads it so
		// (afterCancel), as a branch's success does (cancelledDone).
		return s.afterCancel(ctx, u, o, now)
	}
	return s.afterFailed(ctx, u, o, failed, false, now)
}

// cancelEnding is the final status of a cancelled order: "cancelled",
// naming the step the cancel landed on, in the slot of "compensated".
func cancelEnding(o order) (sas.Status, bool) {
	for _, r := range o.steps {
		if r.Cancelled {
			return cancelledAt(o, r.Step), true
		}
	}
	return sas.Status{}, false
}

// cancelledAt is the final status of o cancelled at step.
func cancelledAt(o order, step int) sas.Status {
	return sas.Status{Status: sas.StatusCancelled, Step: o.wf.Steps[step].Name, Sequence: SeqCompensated(o.n())}
}

// SeqCancelRefused is the sequence number of a refused cancel: after every
// other status of the order.
func SeqCancelRefused(n int) int64 { return seq(4*n+4, 0) }

// cancelMessage decodes a cancel and handles it; a malformed one is
// dropped alone, with its reason.
func (s *Service) cancelMessage(ctx context.Context, u *outbox.Unit, from Origin, body []byte) error {
	m, err := decodeCancel(body)
	if err != nil {
		return drop(err, "cancel message")
	}
	ctx = msgctx.WithTrace(ctx, m.Trace)
	return s.cancel(ctx, u, from, m)
}
