package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/internal/condition"
	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
)

// Wait steps (docs/protocol.md, "Wait steps"): a step with no agent that
// waits for its due time. Its claim is its wait: the lease (CompleteBy) is
// the due time, in the deadline index, and nothing polls. It ends by a
// retry message for its attempt: the supervisor's, when a sweep finds it
// due, or this scheduler's own, sent with an SQS delay when the due time is
// within SQS's 15 minutes. Either way timer decides, and the write that
// ends the wait (Complete with Elapsed, and the successor's claim) is
// fenced on the due time having passed: a timer never fires early, and a
// duplicate or a message racing the sweep's loses its race harmlessly.

// maxDelay is SQS's longest message delay.
const maxDelay = 15 * time.Minute

// timer handles a claimed wait step r: on its claim (dispatch) and on a
// retry message for its attempt. Past its due time it ends the wait;
// before, it writes a due time taken from the order as the lease (its
// arming), and sends itself a delayed retry when the due time is within
// SQS's delay. A due time that cannot be evaluated fails the step. It
// returns an error only for a write or read a redelivery may get through.
//
// Only a retry for the step's attempt ends it (end): its redelivery is
// what re-sends the successor's request should that send be lost. On a
// claim or a re-dispatch (a redelivered message about the step before) a
// wait already due is handed to such a retry, undelayed, rather than ended
// there, where a lost successor request would have no redelivery to re-send
// it.
func (s *Service) timer(ctx context.Context, u *outbox.Unit, o order, def sas.StepDef, r sas.StepRecord, end bool) error {
	now := s.cfg.Clock.Now()
	due, why, err := s.dueOf(ctx, &o, def, r)
	if err != nil {
		return err
	}
	if why != "" {
		s.log.WarnContext(ctx, "wait step failed: its due time could not be evaluated", "order", o.id(), "step", r.Step, "reason", why)
		return s.endWait(ctx, u, o, def, r, sas.OutcomeFailed, why)
	}
	lease := sas.DueOf(r) // the lease, or the one a sweep saw pass
	if !lease.After(now) && !due.After(now) {
		if !end {
			if s.cfg.ControlQueueURL == "" {
				return nil // the sweep's retry ends it
			}
			s.endMessage(u, o, r, 0)
			return nil
		}
		return s.endWait(ctx, u, o, def, r, sas.OutcomeDone, "")
	}
	if target := latest(due, now.Add(time.Millisecond)); def.Timer.Until != "" && !lease.Equal(due) && !lease.Equal(target) {
		// The due time taken from the order becomes the lease: one
		// fenced write, the holder's (a time already past: the lease
		// ends at once, and the wait with it).
		armed, err := s.cfg.Store.Heartbeat(ctx, sas.HeartbeatParams{Key: r.Key(), Owner: r.LockedBy, Attempt: r.Attempt, Now: now, Until: target, Seen: r.CompleteBy})
		if errors.Is(err, sas.ErrLostRace) {
			s.log.InfoContext(ctx, "wait step not armed: it moved meanwhile", "order", o.id(), "step", r.Step, "attempt", r.Attempt)
			return nil
		}
		if err != nil {
			return fmt.Errorf("arming wait step %s: %w", r.Key(), err)
		}
		lease = armed.CompleteBy
	}
	if left := lease.Sub(now); left > 0 && left <= maxDelay && s.cfg.ControlQueueURL != "" {
		// Sooner than the sweep: a retry that arrives when the lease has
		// passed (whole seconds, rounded up: SQS's delay never early).
		s.endMessage(u, o, r, (left+time.Second-1)/time.Second*time.Second)
	}
	s.log.InfoContext(ctx, "step waits for its due time", "order", o.id(), "step", r.Step, "stepName", def.Name,
		"attempt", r.Attempt, "due", due, "leaseUntil", lease)
	return nil
}

// endMessage adds the retry that ends r's wait, delayed by delay.
func (s *Service) endMessage(u *outbox.Unit, o order, r sas.StepRecord, delay time.Duration) {
	u.Send(outbox.Message{
		QueueURL: s.cfg.ControlQueueURL, Delay: delay, What: fmt.Sprintf("the end of wait step %s attempt %d", r.Key(), r.Attempt),
		Body: sas.Encode(sas.Retry{
			V: sas.MessageVersion, Kind: sas.KindRetry, OrderID: o.id(), Step: r.Step, Attempt: r.Attempt,
			Reason: "the wait's due time", Trace: o.ord.Trace,
		}),
	})
}

// dueOf is when wait step r is due: its claim's lease for a duration (the
// claim plus the duration), or the time its Until expression gives on the
// order (its payload and the results before it), cut to MaxWait after its
// claim. why says why it could not be evaluated ("" when it could); err
// is a read of the results that failed.
func (s *Service) dueOf(ctx context.Context, o *order, def sas.StepDef, r sas.StepRecord) (due time.Time, why string, err error) {
	t := def.Timer
	if t.Until == "" {
		return sas.DueOf(r), "", nil
	}
	expr, err := condition.CompileTime(t.Until) // cached; checked when the definition loaded
	if err == nil {
		results, rerr := s.resultsFor(ctx, o, r.Step, false)
		if rerr != nil {
			return time.Time{}, "", rerr // a read: not the expression's fault
		}
		var at time.Time
		if at, err = expr.Eval(condition.Input{Payload: o.ord.Payload, Results: results, OrderID: o.id(), Workflow: o.ord.Workflow}); err == nil {
			from := r.ClaimedAt()
			if from.IsZero() {
				from = r.CompleteBy.Add(-t.Lease())
			}
			if limit := from.Add(sas.MaxWait); at.After(limit) {
				at = limit
			}
			return at, "", nil
		}
	}
	return time.Time{}, sas.BoundReason(fmt.Sprintf("%s: wait step %s's time %s could not be evaluated: %v", sas.ErrorCondition, def.Name, t.Until, err)), nil
}

// endWait ends wait step r as its agent's reply would: done (the
// completion fenced on its due time having passed) or failed.
func (s *Service) endWait(ctx context.Context, u *outbox.Unit, o order, def sas.StepDef, r sas.StepRecord, outcome sas.Outcome, reason string) error {
	if outcome == sas.OutcomeFailed {
		o.steps = nil // its effects read the order after the write, as any failure's
	}
	return s.apply(ctx, u, o, sas.AgentReply{
		V: sas.MessageVersion, Kind: sas.KindAgentReply, OrderID: o.id(), Step: r.Step, Attempt: r.Attempt,
		LockedBy: r.LockedBy, Outcome: outcome, Reason: reason,
		Workflow: o.ord.Workflow, Version: o.ord.Version, Payload: o.ord.Payload, ReplyTo: o.ord.ReplyTo,
		Priority: o.ord.Priority, StepName: def.Name, Generation: r.Generation, Trace: o.ord.Trace,
	}, outcome == sas.OutcomeDone)
}

// retryTimer handles a retry for wait step rec (retry.go): the end of its
// wait when it is held at the message's attempt, a repeat of its end's
// effects when that attempt is done already, and nothing otherwise.
func (s *Service) retryTimer(ctx context.Context, u *outbox.Unit, o order, rec sas.StepRecord, m sas.Retry) error {
	def := o.wf.Steps[rec.Step]
	switch {
	case rec.ProcessState == sas.Processing && rec.LockedBy != "" && rec.Attempt == m.Attempt:
		return s.timer(ctx, u, o, def, rec, true)
	case rec.ProcessState == sas.Processed && rec.Attempt == m.Attempt:
		// Ended already (the sweep's retry and the scheduler's own raced,
		// or a redelivery): the completion's effects again, which a
		// refused write classifies as a duplicate (reply.go).
		return s.endWait(ctx, u, o, def, rec, sas.OutcomeDone, "")
	}
	s.log.InfoContext(ctx, "retry for a wait step no longer waiting at that attempt: nothing changes", "order", o.id(),
		"step", rec.Step, "attempt", m.Attempt, "state", rec.ProcessState, "currentAttempt", rec.Attempt)
	return nil
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
