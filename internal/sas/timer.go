package sas

import (
	"errors"
	"fmt"
	"time"
)

// Wait steps (docs/workflows.md, "Wait steps"; docs/protocol.md, "Wait
// steps"). A step with a Timer has no agent: its claim is its wait. The
// claim's lease (CompleteBy) is the wait's due time, so the due time sits
// in the deadline index like any lease's and nothing polls. The
// supervisor's sweep that finds it due asks the scheduler to end it (a
// retry message); the scheduler completes it with a write fenced on the
// holder, the attempt and the due time having passed (CompleteParams.Elapsed),
// so a timer never fires early and a wait is only store state: it survives
// any instance dying and any deploy.

// MaxWait is the longest a wait step may wait (a year, as Lambda durable
// functions allow), from its claim or, for a time taken from the order,
// from when the step is reached.
const MaxWait = 365 * 24 * time.Hour

// TimerArmLease is the lease of a wait step whose due time is taken from
// the order (Timer.Until), between its claim and the scheduler's write of
// the due time as the lease (the step's arming, one Heartbeat write): a
// scheduler that dies between the two leaves the step to the supervisor,
// which finds it due after this and asks the scheduler to arm it again.
// Never a completion: the due time is evaluated before any.
const TimerArmLease = time.Minute

// Timer makes a step wait (StepDef.Timer): for a duration from its claim,
// or until a time taken from the order. Exactly one of For and Until.
type Timer struct {
	// For is how long the step waits from its claim: more than 0, at most
	// MaxWait.
	For time.Duration
	// Until is a CEL expression over payload, results and order
	// (internal/condition) whose value is the time to wait until: an RFC
	// 3339 string (a field path such as payload.remindAt is one), a CEL
	// timestamp, or a number of seconds since the Unix epoch. A time in the
	// past, or now, ends the wait at once; one more than MaxWait ahead is
	// cut to MaxWait. A value that is none of these fails the step, as a
	// condition that cannot be evaluated does.
	Until string
}

// Lease is how long a claim of the step holds it before the supervisor
// looks: the duration itself, or TimerArmLease until the due time taken
// from the order is written.
func (t Timer) Lease() time.Duration {
	if t.Until != "" {
		return TimerArmLease
	}
	return t.For
}

func (t Timer) check() error {
	switch {
	case (t.For != 0) == (t.Until != ""):
		return errors.New("a wait needs exactly one of a duration (for) and a time (until)")
	case t.For < 0 || t.For > MaxWait:
		return fmt.Errorf("wait for %s: want more than 0 and at most %s", t.For, MaxWait)
	}
	return nil
}

// checkTimer holds a wait step to its shape: a name, no agent, action,
// undo or callback (nothing runs it, so nothing undoes it), and a wait
// within MaxWait. Until's expression is checked where the definition is
// compiled (the scheduler's and the workflow package's validation).
func (s StepDef) checkTimer() error {
	switch {
	case s.Name == "":
		return errors.New("a wait step needs a name")
	case s.Agent != "" || s.Action != "" || s.Undo != "":
		return errors.New("a wait step has no agent, action or undo: nothing runs it")
	case s.Callback != nil:
		return errors.New("a step is a wait or a callback, not both")
	}
	return s.Timer.check()
}

// Agentless reports whether no agent runs the step: a callback step
// without an agent, or a wait step.
func (s StepDef) Agentless() bool { return (s.Callback != nil && s.Agent == "") || s.Timer != nil }

// DueOf is a held wait step's due time as its record keeps it: its lease,
// or, once a sweep found it due and moved its next look on (Wait), the
// lease that passed (WaitingSince).
func DueOf(r StepRecord) time.Time {
	if !r.WaitingSince.IsZero() && r.WaitingSince.Before(r.CompleteBy) {
		return r.WaitingSince
	}
	return r.CompleteBy
}
