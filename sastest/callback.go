package sastest

import (
	"encoding/json"
	"time"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
)

// Answer is how the kit answers a callback step (workflow.Step.Callback)
// while an order runs: what the outside world would send, with the step's
// token, through the intake queue, After the step started waiting (virtual
// time). Zero After answers at once; an After past the step's timeout
// answers nothing, and the step is given up as deployed.
type Answer struct {
	After time.Duration
	// Result completes the step with this result (any JSON value; nil for
	// none) when Fail is empty.
	Result any
	// Fail, when set, fails the step with this reason: given up, its
	// order compensated, an operator alerted.
	Fail string
	// Reject, with Fail, makes the failure a business rejection: the order
	// is compensated and ends StatusRejected, with no alert.
	Reject bool
	// Heartbeat, when set, sends a heartbeat this often while the step
	// waits, before its answer: what keeps a step with a heartbeat timeout
	// alive.
	Heartbeat time.Duration
	// Cancel, instead of completing the step, cancels its order After the
	// step started waiting, as the order's submitter would (a cancel on
	// the intake queue): the wait ends at once, not at the step's timeout,
	// the token completes nothing after, whatever took effect is undone,
	// and the order ends StatusCancelled with no alert. Not with Result or
	// Fail.
	Cancel bool
}

// Answer makes the kit answer the callback step named step, in every
// order run from now on, as a says. Without an answer a callback step
// waits until its timeout (in virtual time, in milliseconds) and is given
// up. A step that is not a callback step fails the test.
func (e *Env) Answer(step string, a Answer) {
	e.t.Helper()
	found := false
	for _, w := range e.defs {
		for _, s := range w.Steps {
			if s.Name == step {
				if s.Callback == nil {
					e.t.Fatalf("sastest: Answer(%q): not a callback step (workflow %s)", step, w.Name)
				}
				found = true
			}
		}
	}
	if !found {
		e.t.Fatalf("sastest: Answer(%q): no workflow has a step of that name", step)
	}
	if a.After < 0 || a.Heartbeat < 0 {
		e.t.Fatalf("sastest: Answer(%q): negative After or Heartbeat", step)
	}
	if a.Cancel && (a.Result != nil || a.Fail != "") {
		e.t.Fatalf("sastest: Answer(%q): Cancel cancels the order; it sends no Result or Fail", step)
	}
	e.answers[step] = a
}

// Advance moves the virtual clock on by d (Now reads it): the supervisor's
// sweeps that fall due run with the next Run. It never moves back.
func (e *Env) Advance(d time.Duration) {
	e.t.Helper()
	if d < 0 {
		e.t.Fatalf("sastest: Advance(%s): the clock only moves forward", d)
	}
	e.clock.Advance(d)
}

// waiter is a callback step of the running order that waits, and what the
// kit sent it so far.
type waiter struct {
	key      sas.StepKey
	attempt  int
	since    time.Time
	lastBeat time.Time
	answered bool
}

// answer sends what is due to the waiting callback steps of the order, and
// returns the next instant at which something is due (zero: nothing) and
// whether it sent anything.
func (e *Env) answer(v sas.OrderView) (next time.Time, sent bool) {
	e.t.Helper()
	now := e.clock.Now()
	later := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, r := range v.Steps {
		a, ok := e.answers[r.StepName]
		if !ok || r.ProcessState != sas.Processing || r.LockedBy == "" {
			continue
		}
		w := e.waiting[r.Key()]
		if w == nil || w.attempt != r.Attempt {
			w = &waiter{key: r.Key(), attempt: r.Attempt, since: r.ClaimedAt(), lastBeat: r.ClaimedAt()}
			e.waiting[r.Key()] = w
		}
		if w.answered {
			continue
		}
		tok := scheduler.Token(e.signer, r)
		switch at := w.since.Add(a.After); {
		case now.Before(at):
			later(at)
		case a.Cancel:
			e.send(e.intakeURL, sas.Encode(sas.Cancel{V: sas.MessageVersion, Kind: sas.KindCancel, OrderID: r.OrderID,
				Reason: "cancelled by the test while " + r.StepName + " waited (sastest.Answer.Cancel)"}))
			w.answered, sent = true, true
			continue
		default:
			e.send(e.intakeURL, sas.Encode(e.completion(r.StepName, tok, a)))
			w.answered, sent = true, true
			continue
		}
		if a.Heartbeat > 0 {
			if beat := w.lastBeat.Add(a.Heartbeat); !now.Before(beat) {
				e.send(e.intakeURL, sas.Encode(sas.Completion{V: sas.MessageVersion, Kind: sas.KindComplete, Token: tok, Outcome: sas.OutcomeHeartbeat, Actor: "sastest"}))
				w.lastBeat, sent = now, true
				later(now.Add(a.Heartbeat))
			} else {
				later(beat)
			}
		}
	}
	return next, sent
}

// completion is the kit's answer a to the waiting step called step.
func (e *Env) completion(step, tok string, a Answer) sas.Completion {
	e.t.Helper()
	m := sas.Completion{V: sas.MessageVersion, Kind: sas.KindComplete, Token: tok, Outcome: sas.OutcomeDone, Actor: "sastest"}
	if a.Fail != "" {
		m.Outcome, m.Reason, m.Rejected = sas.OutcomeFailed, a.Fail, a.Reject
	} else if a.Result != nil {
		b, err := json.Marshal(a.Result)
		if err != nil {
			e.t.Fatalf("sastest: answering %s: encoding the result: %v", step, err)
		}
		m.Result = b
	}
	if err := m.Check(); err != nil {
		e.t.Fatalf("sastest: answering %s: %v", step, err)
	}
	return m
}

// nextDue is the earliest deadline of the order's records: the supervisor
// has nothing to do for it before.
func nextDue(v sas.OrderView) time.Time {
	var next time.Time
	for _, r := range v.Steps {
		if !r.DueAt.IsZero() && (next.IsZero() || r.DueAt.Before(next)) {
			next = r.DueAt
		}
		if !r.OwedAt.IsZero() && len(r.Owes) > 0 && (next.IsZero() || r.OwedAt.Before(next)) {
			next = r.OwedAt
		}
	}
	return next
}

// waits is how long the callback and wait steps of a workflow may wait in
// all: a Run may take that much longer than Options.Timeout.
func (e *Env) waits(workflowName string) time.Duration {
	var d time.Duration
	for _, s := range e.reg[workflowName].Steps {
		if s.Callback != nil {
			d += s.Callback.Timeout
		}
		if t := s.Timer; t != nil {
			d += t.For
			if t.Until != "" {
				d += sas.MaxWait // a time from the order: up to a year
			}
		}
	}
	return d
}
