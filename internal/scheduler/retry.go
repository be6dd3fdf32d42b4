package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/internal/msgctx"
	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
)

func checkRetry(m sas.Retry) error {
	switch {
	case !sas.ValidOrderID(m.OrderID):
		return &sas.ValidationError{Field: "orderId", Reason: "missing or malformed"}
	case m.Step < 0:
		return &sas.ValidationError{Field: "step", Reason: "must not be negative"}
	case m.Attempt < 0:
		return &sas.ValidationError{Field: "attempt", Reason: "must not be negative"}
	}
	return nil
}

// Retry handles a step the supervisor (or an operator's resubmit) handed
// back (docs/protocol.md, "retry"): claim it at the attempt the message
// names and dispatch it. A step handed back while being undone is re-claimed
// as an undo. A claim that loses was taken by somebody else: acknowledge.
func (s *Service) Retry(ctx context.Context, m sas.Retry) error {
	return s.run(ctx, func(u *outbox.Unit) error { return s.retry(ctx, u, m, "") })
}

// retry handles m; queueAgent is the agent whose own reply queue it came
// from, "" for any other queue (fromItsAgent).
func (s *Service) retry(ctx context.Context, u *outbox.Unit, m sas.Retry, queueAgent string) error {
	if err := checkRetry(m); err != nil {
		return drop(err, "retry message")
	}
	o, err := s.load(ctx, m.OrderID)
	if err != nil {
		return err
	}
	o.ord.Trace = sas.OrderTrace(o.ord.Trace, m.Trace)
	ctx = msgctx.WithTrace(ctx, o.ord.Trace)
	rec, ok := o.step(m.Step)
	if sas.IsElement(m.Step) {
		// An element of a fan-out, rescued by the supervisor or handed
		// back by its agent, as a step (fanoutstop.go).
		if rec, ok, err = s.elementOf(ctx, o, m.Step); err != nil {
			return err
		}
	}
	if !ok {
		return drop(nil, "order %s has no step %d", m.OrderID, m.Step)
	}
	now := s.cfg.Clock.Now()
	if m.Requeue {
		// Only a request the scheduler sent for this attempt (trust.go),
		// handed back by its own agent.
		if err := s.requeueAuthentic(o, rec, m, queueAgent); err != nil {
			return err
		}
		// An agent gave up on this attempt's request without an outcome:
		// put it back in the agent queue while the attempt is current. A
		// stale one (rescued, finished) is dropped: no second request.
		if rec.ProcessState.Leased() && rec.LockedBy != "" && rec.Attempt == m.Attempt {
			s.log.InfoContext(ctx, "agent gave up without an outcome: re-sending the request", "order", m.OrderID, "step", m.Step,
				"attempt", rec.Attempt, "reason", m.Reason)
			s.dispatch(ctx, u, o, o.def(m.Step), rec)
			return nil
		}
		s.log.InfoContext(ctx, "requeue for an attempt no longer current: dropped", "order", m.OrderID, "step", m.Step,
			"attempt", m.Attempt, "state", rec.ProcessState, "currentAttempt", rec.Attempt)
		return nil
	}
	if o.def(m.Step).Timer != nil && rec.ProcessState != sas.Pending {
		// A wait step's due time (timer.go): the supervisor's sweep or
		// this scheduler's delayed message asks to end it.
		return s.retryTimer(ctx, u, o, rec, m)
	}
	var from sas.ProcessState
	switch {
	case rec.ProcessState == sas.Pending && rec.LockedBy == "" && rec.Cancelled:
		// Its order was cancelled while it ran, and the supervisor handed
		// it back: it never starts again (cancel.go).
		return s.turnAway(ctx, u, o, rec, now)
	case rec.ProcessState == sas.Pending && rec.LockedBy == "":
		// The supervisor only hands back steps that were ready; a retry for
		// a step still waiting on its predecessor would run the workflow out
		// of order, whoever sent it.
		// (An element waits on nothing: its fan-out claimed it.)
		if prev, ok := o.waitsOn(sas.StepOf(m.Step)); !sas.IsElement(m.Step) && ok {
			return drop(nil, "step %d of order %s waits for step %d, which is %s", m.Step, m.OrderID, prev.Step, prev.ProcessState)
		}
		if notYet(rec, now) {
			// An order that starts later (startat.go): never before its time.
			s.log.InfoContext(ctx, "retry before the order's start time: nothing claimed", "order", m.OrderID, "step", m.Step, "startAt", rec.DueAt)
			return nil
		}
		from = sas.Pending
	case rec.ProcessState == sas.Compensating && rec.LockedBy == "":
		from = sas.Compensating
	default:
		return s.retryLost(ctx, u, o, rec, m, now)
	}
	p := s.claimParams(o, rec, from, now)
	p.Attempt = m.Attempt // the fence is what the supervisor saw, not what we read
	claimed, err := s.cfg.Store.Claim(ctx, *p)
	if refusedByFanOut(err, rec.Key()) {
		return s.fencedOut(ctx, u, o, rec, now) // fanoutstop.go
	}
	if err != nil {
		var re *sas.RaceError
		if errors.As(err, &re) && re.Current != nil {
			return s.retryLost(ctx, u, o, *re.Current, m, now)
		}
		if errors.Is(err, sas.ErrLostRace) {
			return s.retryLost(ctx, u, o, rec, m, now)
		}
		return fmt.Errorf("claiming step %s for a retry: %w", rec.Key(), err)
	}
	s.log.InfoContext(ctx, "step re-claimed", "order", m.OrderID, "step", m.Step, "attempt", claimed.Attempt, "compensation", from == sas.Compensating)
	s.dispatch(ctx, u, o, o.def(m.Step), claimed)
	return nil
}

// retryLost acknowledges a retry whose claim was made already. When the
// claim is the one this retry asked for (the next attempt) and its lease
// still runs, the message is most likely a redelivery after the request
// failed to go out (a failed send, a crash): send the request again, whoever
// holds the claim, so that a lost send costs a redelivery, not a lease. The
// request carries the holder and the reply is fenced on it, and the agent
// and the remote are idempotent, so a request sent twice costs a call at
// most.
func (s *Service) retryLost(ctx context.Context, u *outbox.Unit, o order, cur sas.StepRecord, m sas.Retry, now time.Time) error {
	if cur.Attempt == m.Attempt+1 && s.resend(ctx, cur, now) {
		s.log.InfoContext(ctx, "redelivered retry: re-sending the request", "order", m.OrderID, "step", m.Step, "attempt", cur.Attempt, "holder", cur.LockedBy)
		s.dispatch(ctx, u, o, o.def(m.Step), cur)
		return nil
	}
	if cur.Attempt == m.Attempt+1 && !sas.IsElement(cur.Step) && startFailed(o.def(m.Step), cur) {
		// The claim this retry asked for started a fan-out whose list could
		// not be evaluated, which failed in the same handling: that
		// handling may have stopped before telling it (fanout.go; the
		// simulator's seed 13852, a resubmitted fan-out).
		return s.startFailedAgain(ctx, u, o, cur)
	}
	if cur.Cancelled && cur.ProcessState == sas.Error && cur.Attempt == m.Attempt {
		// A redelivery of the retry that turned the step away, whose
		// handler stopped before the compensation's claim (a crash, a
		// timeout): nothing else would start it, so the cancellation goes
		// on from here (idempotent: a claim made already is re-sent or
		// lost to, an order undone already is told again).
		s.log.InfoContext(ctx, "redelivered retry of a turned-away step: the cancellation goes on", "order", m.OrderID, "step", m.Step, "attempt", m.Attempt)
		if sas.IsElement(cur.Step) {
			return s.fanOutSettled(ctx, u, o, fanOutKey(cur.OrderID, cur.Step), now) // fanoutstop.go
		}
		return s.afterCancel(ctx, u, o, now)
	}
	s.log.InfoContext(ctx, "retry lost the race", "order", m.OrderID, "step", m.Step, "attempt", m.Attempt,
		"state", cur.ProcessState, "currentAttempt", cur.Attempt, "holder", cur.LockedBy)
	return nil
}
