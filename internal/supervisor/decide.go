package supervisor

import (
	"fmt"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// action is what the supervisor does with one record.
type action int

const (
	skip   action = iota // not due (a stale index entry, or a state the supervisor does not own)
	rescue               // hand back for another attempt after a backoff
	giveUp               // Error or CompensationFailed, alert an operator
	wait                 // extend a held lease: its request may still be queued
	fire                 // a wait step's due time passed: ask the scheduler to end it
)

func (a action) String() string {
	switch a {
	case rescue:
		return "rescue"
	case giveUp:
		return "give up"
	case wait:
		return "wait"
	case fire:
		return "fire"
	}
	return "skip"
}

// decision is the outcome of decide: everything the write and the messages
// need, computed without touching the store, the queue or the clock.
type decision struct {
	Action   action
	Failures int           // the FailureCount the write leaves
	Backoff  time.Duration // rescue only: the retry message's delay
	Until    time.Time     // wait only: the lease's new deadline
	Lost     bool          // rescue only: a request lost before pick-up, or a step never claimed: no failure counted
	// Since is, for the re-drive of a step never claimed, when it first
	// went unclaimed past its pick-up deadline (sas.RescueParams.WaitingSince).
	Since  time.Time
	Reason string // for the history, LastError, the retry message and the alert
}

// policy is the part of Config the decision reads.
type policy struct {
	MaxFailures   int
	BaseBackoff   time.Duration
	MaxBackoff    time.Duration
	Undo          sas.RetryPolicy // an undo's, for a step that sets none
	PickupTimeout time.Duration
	WaitLimit     time.Duration
	// Horizon is how long after its first passed deadline an unstarted
	// attempt's request may still be delivered (Config.DeliveryHorizon).
	Horizon time.Duration
	Steps   map[string]sas.StepLimits
}

// limits are a step's limits, the defaults filled in: def's when its
// definition was found (ok), else the deployed ones by step name.
func (p policy) limits(step string, def sas.StepLimits, found bool) sas.StepLimits {
	l, ok := def, found
	if !found {
		l, ok = p.Steps[step]
	}
	if !ok {
		l.Timeout = p.PickupTimeout
	}
	if l.WaitLimit == 0 {
		l.WaitLimit = p.WaitLimit
	}
	if l.MaxFailures == 0 {
		l.MaxFailures = p.MaxFailures
	}
	if l.BaseBackoff == 0 {
		l.BaseBackoff = p.BaseBackoff
	}
	if l.MaxBackoff == 0 {
		l.MaxBackoff = max(p.MaxBackoff, l.BaseBackoff)
	}
	l.MaxBackoff = min(l.MaxBackoff, MaxDelay)
	l.Undo = l.Undo.Or(p.Undo).Or(sas.DefaultUndoRetry).WithDefaults()
	return l
}

// retry is the retry policy of rec's leg under l (its defaults filled in
// by policy.limits): an undo's own, which rides out an outage, or the
// step's.
func retry(l sas.StepLimits, undo bool) sas.RetryPolicy {
	if undo {
		return l.Undo
	}
	return sas.RetryPolicy{MaxAttempts: l.MaxFailures, InitialInterval: l.BaseBackoff,
		Coefficient: l.BackoffCoefficient, MaxInterval: l.MaxBackoff}
}

// decide is the supervisor's only judgement (docs/pattern.md §2: "failed or stuck?",
// "retry or give up?"; docs/protocol.md, "Deadlines start at pick-up":
// "queued or failed?"). It is a pure function of the record as the index
// showed it and the time. The write that follows is fenced on that view, so
// a decision made on a stale view loses the race instead of doing harm.
//
// A held step past its deadline whose pick-up was never reported
// (StartedAt zero) has not started: its request waits in the agent queue
// (an agent picking it up late reports so first, and so does every
// redelivery). It is not a failure and its request is not sent again: the
// deadline moves to the request's delivery horizon (the queue's retention
// from the first deadline that passed, a bound on when it was sent plus the
// retention), and only past that, when the request can no longer be
// delivered, is the step re-driven as lost, still without a failure
// counted. A step whose pick-up was reported and whose deadline passed
// failed: its agent died or overran.
func (p policy) decide(rec sas.StepRecord, lim sas.StepLimits, now time.Time) decision {
	if !sas.Due(rec, now) {
		return decision{Action: skip}
	}
	failures := rec.FailureCount + 1
	why := stall(rec)
	forward := rec.ProcessState == sas.Processing || rec.ProcessState == sas.Pending
	// A wait (or a start) the scheduler set within SQS's delay is ended by
	// the scheduler's own delayed retry: the sweep is its backstop, a
	// pick-up timeout later, so the two do not race to send.
	grace := time.Duration(0)
	if !rec.UpdatedAt.IsZero() && rec.DueAt.Sub(rec.UpdatedAt) <= MaxDelay {
		grace = p.PickupTimeout
	}
	if lim.Timer && rec.ProcessState == sas.Processing && rec.LockedBy != "" {
		if now.Before(rec.DueAt.Add(grace)) {
			return decision{Action: skip}
		}
		// A wait step's deadline is its due time: nothing ran that could
		// fail. The scheduler ends it, fenced on the due time having
		// passed; nothing is counted, nothing given up, whatever the
		// queues hold (docs/protocol.md, "Wait steps").
		return decision{
			Action:   fire,
			Failures: rec.FailureCount,
			Until:    now.Add(p.PickupTimeout), // the next look, should the scheduler not end it
			Reason:   fmt.Sprintf("the wait of attempt %d is due at %s", rec.Attempt, rec.DueAt.UTC().Format(time.RFC3339)),
		}
	}
	if rec.ProcessState == sas.Pending && rec.LockedBy == "" && rec.Attempt == 0 && rec.FailureCount == 0 &&
		now.Before(rec.DueAt.Add(grace+p.PickupTimeout)) {
		if now.Before(rec.DueAt.Add(grace)) {
			return decision{Action: skip}
		}
		// A step never claimed nor failed: an order that starts later,
		// at its start time (its pick-up deadline). Started, not counted
		// as a stall; once a pick-up timeout has passed without a claim
		// it is re-driven as any stranded step (docs/intake.md,
		// "Starting later").
		return decision{
			Action:   fire,
			Failures: rec.FailureCount,
			Reason:   fmt.Sprintf("never claimed by %s (its pick-up deadline, or its order's start time)", rec.DueAt.UTC().Format(time.RFC3339)),
		}
	}
	if lim.Outside && rec.ProcessState == sas.Processing && rec.LockedBy != "" {
		// A callback step's deadline is its timeout or its missed
		// heartbeat: nothing runs that a re-drive could help, and a
		// re-drive would hand out a new token. Given up, whatever the
		// queues hold (docs/protocol.md, "Callback steps").
		return decision{
			Action:   giveUp,
			Failures: failures,
			Reason:   fmt.Sprintf("no completion or heartbeat by the deadline %s of callback attempt %d (giving up)", rec.DueAt.UTC().Format(time.RFC3339), rec.Attempt),
		}
	}
	if forward && lim.TotalLimit > 0 && !rec.CreatedAt.IsZero() && !now.Before(rec.CreatedAt.Add(lim.TotalLimit)) {
		return decision{
			Action:   giveUp,
			Failures: failures,
			Reason:   fmt.Sprintf("%s; the step's overall limit of %s since the order was submitted has passed (giving up)", why, lim.TotalLimit),
		}
	}
	if rec.ProcessState.Leased() && rec.LockedBy != "" && rec.StartedAt.IsZero() {
		since := rec.WaitingSince
		if since.IsZero() {
			since = rec.DueAt
		}
		horizon := since.Add(p.Horizon)
		if now.Before(horizon) {
			until := horizon
			if forward && lim.TotalLimit > 0 && !rec.CreatedAt.IsZero() {
				until = minTime(until, rec.CreatedAt.Add(lim.TotalLimit))
			}
			return decision{
				Action:   wait,
				Failures: rec.FailureCount,
				Until:    until,
				Reason: fmt.Sprintf("%s with no pick-up reported: its request may still be queued; not a failure, not sent again (waiting until its delivery horizon %s)",
					why, horizon.UTC().Format(time.RFC3339)),
			}
		}
		return decision{
			Action:   rescue,
			Lost:     true,
			Failures: rec.FailureCount,
			Reason: fmt.Sprintf("%s and never reported picked up by its delivery horizon %s: the request was lost; re-driven, not a failure",
				why, horizon.UTC().Format(time.RFC3339)),
		}
	}
	// An undo (Compensating) has its own retry policy, which rides out an
	// outage where the step fails fast (docs/workflows.md).
	pol := retry(lim, rec.ProcessState == sas.Compensating)
	if rec.LockedBy == "" {
		return unclaimed(rec, pol, why, now)
	}
	if failures >= pol.MaxAttempts {
		return decision{
			Action:   giveUp,
			Failures: failures,
			Reason:   fmt.Sprintf("%s (failure %d of %d: giving up)", why, failures, pol.MaxAttempts),
		}
	}
	// The leg's retry policy's interval, jittered as the scheduler's for a
	// reported failure (the same draw, seeded by the step and attempt): the
	// steps one outage stalled together are not all re-driven together.
	b := pol.Interval(failures, sas.JitterSeed(rec.Key(), rec.Attempt))
	return decision{
		Action:   rescue,
		Failures: failures,
		Backoff:  b,
		Reason:   fmt.Sprintf("%s (failure %d of %d: retry in %s)", why, failures, pol.MaxAttempts, b),
	}
}

// unclaimed is the decision on a step handed back (a rescue, an undo's
// retry) or stranded, and not claimed by its pick-up deadline: no attempt
// of it ran, so none failed (docs/protocol.md, "A step never claimed has
// not failed"). Its re-drive message waited in a busy queue, died with a
// scheduler that held it, or was lost: it is sent again with no failure
// counted, after as long as the step has waited unclaimed already (since
// its first pick-up deadline passed, kept in WaitingSince), at most the
// leg's longest retry interval. So a message truly lost is sent again at
// once, and a queue backlogged for an hour costs each of its steps a few
// messages, not one per pick-up timeout.
func unclaimed(rec sas.StepRecord, pol sas.RetryPolicy, why string, now time.Time) decision {
	since := rec.WaitingSince
	if since.IsZero() {
		since = rec.DueAt
	}
	b := min(max(now.Sub(since), 0), MaxDelay)
	if pol.MaxInterval > 0 {
		b = min(b, pol.MaxInterval)
	}
	b = b.Truncate(time.Second) // an SQS delay
	return decision{
		Action:   rescue,
		Lost:     true,
		Failures: rec.FailureCount,
		Backoff:  b,
		Since:    since,
		Reason: fmt.Sprintf("%s, unclaimed since %s: nothing ran, not a failure; sent again in %s",
			why, since.UTC().Format(time.RFC3339), b),
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// stall says what kind of stall the record shows. A leased record's agent
// died or timed out (the pattern cannot tell which); an unleased one was
// handed out and nobody claimed it (its message was lost, or every
// scheduler was busy or down).
func stall(rec sas.StepRecord) string {
	due := rec.DueAt.UTC().Format(time.RFC3339)
	switch {
	case rec.ProcessState == sas.Processing:
		return fmt.Sprintf("attempt %d not finished by its deadline %s", rec.Attempt, due)
	case rec.ProcessState == sas.Compensating && rec.LockedBy != "":
		return fmt.Sprintf("undo attempt %d not finished by its deadline %s", rec.Attempt, due)
	case rec.ProcessState == sas.Compensating:
		return fmt.Sprintf("undo not re-claimed by its pick-up deadline %s", due)
	}
	return fmt.Sprintf("not claimed by its pick-up deadline %s", due)
}
