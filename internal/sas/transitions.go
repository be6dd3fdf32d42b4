package sas

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// The transitions below are pure functions of the record a writer last saw
// and the time it was given. The in-memory store applies them directly; the
// DynamoDB store encodes the same guards as condition expressions, and one
// contract suite holds both to the same behaviour.

// ClaimParams takes a Pending step with no holder (docs/pattern.md §4.3). With From
// set to Processed, Error or CompensationFailed it starts the step's undo
// instead (Compensating Transaction pattern), and with From Compensating it
// re-claims an undo the supervisor handed back.
type ClaimParams struct {
	Key        StepKey
	From       ProcessState // the state the claimer saw; "" means Pending
	Attempt    int          // the attempt the claimer saw; the claim makes it Attempt+1
	Owner      string
	Now        time.Time
	CompleteBy time.Time
	// Siblings, when set, are other steps of the same order as the claimer
	// read them: the claim is made only if each is still in the state read,
	// and otherwise loses the race to the first that changed (a RaceError
	// on that step). A compensation's undo claim sets them, so that an
	// operator's resubmit since the compensation read the order wins
	// (docs/protocol.md, "A resubmit against a compensation").
	Siblings []StepSeen
	// RequestedBy and Why, on a compensation's undo claim, are who asked
	// for the compensation (a compensate message's sender, as the queue
	// names it) and why (its reason): the claim's history entry records
	// them (ClaimReason), so that who compensated an order is kept with it,
	// not only logged (docs/trust.md, "Operators"). The lease is Owner's.
	RequestedBy, Why string
}

// ClaimReason is the reason a claim that leaves a step in state to writes
// in its history entry, in every store.
func (p ClaimParams) ClaimReason(to ProcessState) string {
	if to != Compensating {
		return "claimed"
	}
	if p.RequestedBy == "" {
		return "compensation claimed"
	}
	reason := "compensation claimed, requested by " + p.RequestedBy
	if p.Why != "" {
		reason += ": " + p.Why
	}
	return BoundReason(reason)
}

// StepSeen is a step of an order in the state a writer read it in.
type StepSeen struct {
	Step  int
	State ProcessState
	// Cancelled is whether the step carried a cancel's mark as read. A
	// mark moves no state, so a fence on the state alone would miss it: a
	// graph's completion, planned before a cancel marked a sibling in
	// flight, would go on to claim what follows (docs/protocol.md,
	// "Cancellation").
	Cancelled bool
}

// SeenOf is step r as a writer read it, for a fence.
func SeenOf(r StepRecord) StepSeen {
	return StepSeen{Step: r.Step, State: r.ProcessState, Cancelled: r.Cancelled}
}

// Target returns the state a claim requires and the state it leaves.
func (p ClaimParams) Target() (from, to ProcessState, err error) {
	switch p.From {
	case "", Pending:
		return Pending, Processing, nil
	case Processed, Error, CompensationFailed, Compensating:
		return p.From, Compensating, nil
	}
	return "", "", &ValidationError{Field: "from", Reason: fmt.Sprintf("cannot claim a %s step", p.From)}
}

func (p ClaimParams) validate() error {
	switch {
	case p.Owner == "":
		return &ValidationError{Field: "owner", Reason: "a claim needs an owner"}
	case !p.CompleteBy.After(p.Now):
		return &ValidationError{Field: "completeBy", Reason: "the deadline must be after now"}
	}
	seen := map[int]bool{p.Key.Step: true}
	if len(p.Fences()) > len(p.Siblings) {
		seen[StepOf(p.Key.Step)] = true // an element's fan-out: fenced already (Fences)
	}
	for _, sib := range p.Siblings {
		if seen[sib.Step] || sib.State == "" {
			return &ValidationError{Field: "siblings", Reason: fmt.Sprintf("step %d is the claimed step, repeated, or has no state", sib.Step)}
		}
		seen[sib.Step] = true
	}
	return nil
}

// Fences are the other records of its order a claim is fenced on: its
// Siblings and, for an element's claim of its next attempt (from Pending:
// after a transient outcome, a rescue, a hand-back), its fan-out step as a
// running fan-out, Processing and unmarked. So no element starts once its
// fan-out stopped, was cancelled or is being undone, whoever claims it and
// whatever it read (docs/decisions.md, "Fan-out elements are records of
// their own"). Every store checks them in the claim's write
// (CheckSiblings; DynamoDB's, a ConditionCheck each). Such a claim names
// no sibling of its own for its fan-out step (Check refuses it).
func (p ClaimParams) Fences() []StepSeen {
	from, _, err := p.Target()
	if err != nil || from != Pending || !IsElement(p.Key.Step) {
		return p.Siblings
	}
	return append(slices.Clip(p.Siblings), StepSeen{Step: StepOf(p.Key.Step), State: Processing})
}

// CheckSiblings is the fence of a claim on the other records of its order
// (Fences): each still in the state its claimer read, with or without a
// cancel's mark as read. steps are the order's records by step number.
func CheckSiblings(p ClaimParams, steps func(step int) (StepRecord, bool)) error {
	return checkSeen(p.Key.OrderID, p.Fences(), steps)
}

// checkSeen refuses, as a race lost to the first that moved, unless each
// step of seen is as seen.
func checkSeen(orderID string, seen []StepSeen, steps func(step int) (StepRecord, bool)) error {
	for _, sib := range seen {
		r, ok := steps(sib.Step)
		if !ok {
			return fmt.Errorf("step %d of order %s: %w", sib.Step, orderID, ErrNotFound)
		}
		if r.ProcessState != sib.State || r.Cancelled != sib.Cancelled {
			return race("claim", r)
		}
	}
	return nil
}

// Check rejects parameters no record could take (ErrInvalid). Stores check
// them before they look at the record, so a bad call is invalid whatever
// the record, in every store.
func (p ClaimParams) Check() error {
	if err := p.validate(); err != nil {
		return err
	}
	_, _, err := p.Target()
	return err
}

// Claim moves Pending → Processing, fenced on no holder and the attempt seen.
// A compensation claim from a settled state starts a fresh failure count.
func Claim(r StepRecord, p ClaimParams) (StepRecord, error) {
	if err := p.validate(); err != nil {
		return r, err
	}
	from, to, err := p.Target()
	if err != nil {
		return r, err
	}
	if r.ProcessState != from || r.LockedBy != "" || r.Attempt != p.Attempt {
		return r, race("claim", r)
	}
	reason := p.ClaimReason(to)
	if to == Compensating && from != Compensating {
		r.FailureCount = 0
	}
	r.Attempt++
	r.LockedBy, r.CompleteBy, r.DueAt = p.Owner, p.CompleteBy, p.CompleteBy
	r.WaitingSince = time.Time{} // how long it waited unclaimed (Rescue): a new attempt's wait starts afresh
	r = claimSettles(r, from)
	return move(r, to, p.Owner, reason, p.Now), nil
}

// CompleteParams reports a step done by the holder of a given attempt. Next,
// when set, claims the following step in the same atomic write, so that no
// crash can leave an order with a finished step and a successor nobody owns.
type CompleteParams struct {
	Key          StepKey
	Owner        string
	Attempt      int
	Now          time.Time
	Compensation bool // finishing an undo: Compensating → Compensated
	Next         *ClaimParams
	// Run is what the agent measured of the run (its reply's timing), for
	// the history entry; zero when not reported.
	Run RunTiming
	// Result is the step's result (compacted, within MaxResultBytes; nil
	// for none), recorded on a forward step's record. An undo's result is
	// not recorded: the record keeps its step's.
	Result json.RawMessage
	// Cancelled: the holder knows its order was cancelled (the step's
	// Cancelled mark): the step completes without claiming a successor.
	// Without it, a forward completion of a marked step is refused, so
	// that no successor of a cancelled step is ever claimed
	// (docs/protocol.md, "Cancellation").
	Cancelled bool
	// By is who completed the step from outside (a callback step's
	// completer: the queue's word for the sender and what it says it is),
	// recorded in the history entry's reason; "" for an agent's reply.
	By string
	// More, with Next, claims further steps in the same write: the
	// branches a step starts when several follow it (graph.go).
	More []ClaimParams
	// Siblings, when set, fence the write on other steps of the order as
	// the completer read them (as ClaimParams.Siblings): a step of a graph
	// that completes while other branches are in flight is written only if
	// none of them moved, so that a join is never missed by two branches
	// that complete at once, and nothing starts after a branch failed.
	Siblings []StepSeen
	// Skip settles, in the same write, the steps that the order passes
	// over without running them (their conditions: skip.go). In a straight
	// line they are the steps after Key, in order, all before Next; in a
	// graph (Graph), any steps of the order the completion made ready. A
	// forward completion only.
	Skip []Skip
	// Elapsed: the end of a wait step (timer.go), fenced besides on its
	// due time having passed (DueOf at or before Now). A timer never fires
	// early, whoever asks.
	Elapsed bool
	// Graph says the completion is in a workflow with branches: its skips
	// need not be the steps after Key in line (checkGraphSkips).
	Graph bool
}

// Claims are the claims a completion makes with it: Next, then More.
func (p CompleteParams) Claims() []ClaimParams {
	if p.Next == nil {
		return nil
	}
	return append([]ClaimParams{*p.Next}, p.More...)
}

// Check rejects a Next no record could take, or one that is the step
// being completed (one write cannot move a record twice).
func (p CompleteParams) Check() error {
	if p.Next == nil && len(p.More) > 0 {
		return &ValidationError{Field: "more", Reason: "further claims need a next"}
	}
	if len(p.Skip) > 0 && p.Compensation {
		return &ValidationError{Field: "skip", Reason: "an undo's completion skips nothing"}
	}
	check := checkSkips
	if p.Graph {
		check = checkGraphSkips
	}
	if err := check(p.Skip, p.Key.Step, p.Next); err != nil {
		return err
	}
	if p.Cancelled && len(p.Claims()) > 0 {
		return &ValidationError{Field: "next", Reason: "a cancelled step's completion claims no successor"}
	}
	seen := map[StepKey]bool{p.Key: true}
	for _, n := range p.Claims() {
		if n.Key == p.Key {
			return &ValidationError{Field: "next", Reason: fmt.Sprintf("step %s cannot claim itself as its next", p.Key)}
		}
		if seen[n.Key] {
			return &ValidationError{Field: "next", Reason: fmt.Sprintf("step %s: a completion claims each step once", n.Key)}
		}
		seen[n.Key] = true
		if len(n.Siblings) > 0 {
			return &ValidationError{Field: "next", Reason: "a next claim takes no siblings (they fence a Claim alone)"}
		}
		if err := n.Check(); err != nil {
			return err
		}
	}
	for _, sib := range p.Siblings {
		k := StepKey{OrderID: p.Key.OrderID, Step: sib.Step}
		if seen[k] || sib.State == "" {
			return &ValidationError{Field: "siblings", Reason: fmt.Sprintf("step %d is the completed or a claimed step, repeated, or has no state", sib.Step)}
		}
		seen[k] = true
	}
	for _, k := range p.Skip {
		if seen[StepKey{OrderID: p.Key.OrderID, Step: k.Step}] {
			return &ValidationError{Field: "skip", Reason: fmt.Sprintf("step %d is skipped and also completed, claimed or fenced", k.Step)}
		}
	}
	return nil
}

// CheckSiblingsOf is a completion's fence on the order's other steps
// (CompleteParams.Siblings), as CheckSiblings is a claim's.
func CheckSiblingsOf(p CompleteParams, steps func(step int) (StepRecord, bool)) error {
	return checkSeen(p.Key.OrderID, p.Siblings, steps)
}

// Leg returns the leased state a completion or failure requires, and the
// states it leaves on success and on failure.
func Leg(compensation bool) (running, done, failed ProcessState) {
	if compensation {
		return Compensating, Compensated, CompensationFailed
	}
	return Processing, Processed, Error
}

// Complete moves Processing → Processed, fenced on holder and attempt. A reply
// that arrives after the deadline is still accepted while nobody has taken the
// step away: the work is done and the attempt is still the current one.
func Complete(r StepRecord, p CompleteParams) (StepRecord, error) {
	running, done, _ := Leg(p.Compensation)
	if !heldBy(r, running, p.Owner, p.Attempt) || (p.Elapsed && (DueOf(r).IsZero() || DueOf(r).After(p.Now))) || (!p.Compensation && r.Cancelled && !p.Cancelled) {
		return r, race("complete", r)
	}
	r = unlease(r)
	if !p.Compensation {
		r.Result = p.Result
	}
	return timed(move(r, done, p.Owner, p.CompletedReason(), p.Now), p.Run), nil
}

// heldBy is the holder's fence: the state, a holder (an undo the supervisor
// handed back has none, and no empty owner may finish it) and the attempt.
func heldBy(r StepRecord, state ProcessState, owner string, attempt int) bool {
	return r.ProcessState == state && r.LockedBy != "" && r.LockedBy == owner && r.Attempt == attempt
}

// FailParams reports a permanent failure of the holder's attempt.
type FailParams struct {
	Key          StepKey
	Owner        string
	Attempt      int
	Now          time.Time
	Reason       string
	Compensation bool      // the undo failed: Compensating → CompensationFailed
	Run          RunTiming // as CompleteParams.Run
	// Rejected: the agent reported a business rejection (agent.Reject) of
	// a forward step. Recorded (StepRecord.Rejected): no alert, and the
	// order ends Rejected.
	Rejected bool
	// Effect: the step's effect happened although it failed (its result
	// was over the bounds, ErrorResultTooLarge): UndoOwed is set, so a
	// resubmit keeps its key. Its undo runs with the order's compensation,
	// as for every step in Error with an Undo.
	Effect bool
}

// Fail moves Processing → Error (or Compensating → CompensationFailed),
// fenced on holder and attempt.
func Fail(r StepRecord, p FailParams) (StepRecord, error) {
	running, _, failed := Leg(p.Compensation)
	if !heldBy(r, running, p.Owner, p.Attempt) {
		return r, race("fail", r)
	}
	r = unlease(r)
	r.LastError = p.Reason
	r.FailedBy, r.Refused = p.Owner, !p.Compensation
	if !p.Compensation {
		r.Rejected = p.Rejected
		r.UndoOwed = r.UndoOwed || p.Effect
	}
	return timed(move(r, failed, p.Owner, p.Reason, p.Now), p.Run), nil
}

// RescueParams is the supervisor handing a stuck or stranded step back for
// another attempt (docs/pattern.md §4.6). From is the state the supervisor saw:
// Processing past CompleteBy, Pending past its pick-up deadline, or
// Compensating (held or not) past its deadline.
type RescueParams struct {
	Key      StepKey
	From     ProcessState
	Attempt  int
	Now      time.Time
	PickupBy time.Time // the new deadline by which a scheduler must claim it
	Actor    string
	Reason   string
	// Holder, when set, ends the attempt early on its agent's word: the
	// agent reported a transient outcome for it (docs/protocol.md, "A
	// failure is not a wait"). The write is then fenced on the lease held
	// (state, holder, attempt) instead of on its deadline having passed.
	Holder string
	// Run, with Holder, is what the agent measured of the run it reported
	// transient (as CompleteParams.Run).
	Run RunTiming
	// Lost re-drives a held attempt whose request was never reported
	// picked up and can no longer be delivered (its delivery horizon
	// passed): the request was lost, the attempt did not fail, so no
	// failure is counted (docs/protocol.md, "Deadlines start at pick-up");
	// so does the re-drive of a step handed back and never claimed by its
	// pick-up deadline: nothing of it ran ("A step never claimed has not
	// failed").
	Lost bool
	// WaitingSince, set only with Lost for a step not held (never claimed),
	// is when it first went unclaimed past its pick-up deadline: the record
	// keeps it (StepRecord.WaitingSince) until a claim, so that each
	// re-drive waits longer than the one before.
	WaitingSince time.Time
}

// Rescue moves an expired Processing (or stranded Pending) step to Pending,
// bumps FailureCount (not for a Lost re-drive) and sets a pick-up deadline. It re-checks state, attempt
// and expiry, so it can never overwrite a step that completed meanwhile.
func Rescue(r StepRecord, p RescueParams) (StepRecord, error) {
	// Parameters first, the guard second: a bad call is invalid whatever
	// the record, in every store.
	if !p.PickupBy.After(p.Now) {
		return r, &ValidationError{Field: "pickupBy", Reason: "the pick-up deadline must be after now"}
	}
	if !p.WaitingSince.IsZero() && (!p.Lost || p.Holder != "") {
		return r, &ValidationError{Field: "waitingSince", Reason: "only the re-drive of a step never claimed keeps how long it has waited"}
	}
	if err := checkEnd("rescue", r, p.From, p.Attempt, p.Holder, p.Now); err != nil {
		return r, err
	}
	r = unlease(r)
	if !p.Lost {
		r.FailureCount++
	}
	r.WaitingSince = p.WaitingSince
	r.DueAt = p.PickupBy
	r.LastError = p.Reason
	return timed(move(r, RescueTarget(p.From), p.Actor, p.Reason, p.Now), p.Run), nil
}

// RescueTarget is where a rescue leaves a step: Pending for the forward
// leg, Compensating with no holder for an undo.
func RescueTarget(from ProcessState) ProcessState {
	if from == Compensating {
		return Compensating
	}
	return Pending
}

// GiveUpTarget is where giving up leaves a step.
func GiveUpTarget(from ProcessState) ProcessState {
	if from == Compensating {
		return CompensationFailed
	}
	return Error
}

// GiveUpParams is the supervisor giving up on a step past the threshold.
type GiveUpParams struct {
	Key     StepKey
	From    ProcessState
	Attempt int
	Now     time.Time
	Actor   string
	Reason  string

	// OwedAt is when a sweep (re)sends what the give-up owes if the giver
	// does not settle it first; zero means Now.
	OwedAt time.Time

	// Holder: as RescueParams.Holder, the scheduler giving up on the
	// attempt its agent reported transient, the last its policy allows.
	Holder string
	Run    RunTiming // as RescueParams.Run
}

// GiveUp moves an expired step to Error, with the same guard as Rescue, and
// records what it owes (GiveUpOwes) in the same write.
func GiveUp(r StepRecord, p GiveUpParams) (StepRecord, error) {
	if err := checkEnd("give up", r, p.From, p.Attempt, p.Holder, p.Now); err != nil {
		return r, err
	}
	r = unlease(r)
	r.FailureCount++
	r.LastError = p.Reason
	r.FailedBy, r.Refused = p.Actor, false
	r = owe(r, GiveUpTarget(p.From), p)
	return timed(move(r, GiveUpTarget(p.From), p.Actor, p.Reason, p.Now), p.Run), nil
}

// ResubmitParams is an operator sending a failed step round again (docs/pattern.md §4.7).
type ResubmitParams struct {
	Key      StepKey
	Attempt  int
	Now      time.Time
	PickupBy time.Time
	Actor    string
	Reason   string
}

// Resubmit moves Error → Pending with FailureCount reset and the attempt
// moved on by one, fenced on the attempt.
func Resubmit(r StepRecord, p ResubmitParams) (StepRecord, error) {
	if r.ProcessState != Error || r.Attempt != p.Attempt {
		return r, race("resubmit", r)
	}
	if err := resubmitOwing(r); err != nil {
		return r, err
	}
	if r.Cancelled {
		// Its order was cancelled: it never starts again (cancel.go).
		return r, &ValidationError{Field: "step", Reason: fmt.Sprintf("step %s cannot be resubmitted: its order was cancelled", r.Key())}
	}
	if !p.PickupBy.After(p.Now) {
		return r, &ValidationError{Field: "pickupBy", Reason: "the pick-up deadline must be after now"}
	}
	if n := len(r.History) - (HistoryLimit - 1); n > 0 {
		r.History = append([]HistoryEntry(nil), r.History[n:]...)
	}
	r.FailureCount = 0
	r.DueAt = p.PickupBy
	// A resubmit is a new round of the step, and moves the fence as a claim
	// does: every event of the round (its give-up, its failure, their
	// alerts and statuses) is named by an attempt the round before never
	// had, so no two events share an alert id or a status sequence number
	// (issue 29, N5: a resubmitted step given up before any claim re-used
	// the refusal's alert id, and a pipeline that drops repeats by id
	// never paged it).
	r.Attempt++
	if r.Refused && !r.UndoOwed {
		// Nothing took effect under the old key: a new generation, so that
		// a remote which stored the refusal does not replay it.
		r.Generation++
	}
	r.FailedBy, r.Refused, r.Rejected = "", false, false
	return move(r, Pending, p.Actor, p.Reason, p.Now), nil
}

// NoteEffectParams records that a step's effect may exist: a done reply for
// it arrived while it was not Processed (after a refusal of another
// delivery, or after the supervisor took the attempt back).
type NoteEffectParams struct {
	Key StepKey
	// State is the state the writer saw (Pending, Processing or Error): the
	// write is fenced on it.
	State ProcessState
	Now   time.Time
	Actor string
	// Attempt is the attempt the done reply was for, for the history.
	Attempt int
}

// NoteEffect sets UndoOwed on a forward step that is not Processed. A
// Processed step's effect is owed its undo already, and a step whose undo
// began is past the point where a forward effect may be noted: both refuse.
func NoteEffect(r StepRecord, p NoteEffectParams) (StepRecord, error) {
	switch p.State {
	case Pending, Processing, Error:
	default:
		return r, &ValidationError{Field: "state", Reason: fmt.Sprintf("the effect of a %s step is not noted", p.State)}
	}
	if r.ProcessState != p.State {
		return r, race("note effect", r)
	}
	if r.UndoOwed {
		return r, nil // noted already: no write, no history entry
	}
	// Not a transition: UpdatedAt is kept, so an Error record keeps its
	// place in the index (DynamoDB's IdxSK is the failure time) and a
	// give-up's owed alert, rebuilt from the record, stays the same.
	r.UndoOwed = true
	r.History = append(append([]HistoryEntry(nil), r.History...), HistoryEntry{
		At: p.Now, Step: r.Step, Actor: p.Actor, From: r.ProcessState, To: r.ProcessState, Attempt: p.Attempt,
		Reason: fmt.Sprintf("a done reply for attempt %d arrived while the step was %s: its effect may exist", p.Attempt, r.ProcessState),
	})
	return r, nil
}

// WaitParams is the supervisor letting a leased step's deadline pass
// without counting a failure, because no pick-up of its request was
// reported and it may still be queued (docs/protocol.md, "Deadlines start
// at pick-up"). It is
// fenced on exactly the lease it saw: state, holder, attempt and deadline,
// so of several supervisors that saw the same deadline one extends it and
// the others lose the race.
type WaitParams struct {
	Key     StepKey
	From    ProcessState // Processing or Compensating, held
	Owner   string       // the holder seen
	Attempt int          // the attempt seen
	DueAt   time.Time    // the deadline seen (passed)
	// WaitingSince is the record's WaitingSince as seen: zero when this is
	// the attempt's first wait.
	WaitingSince time.Time
	Now          time.Time
	Until        time.Time // the new deadline: after Now
	Actor        string
	Reason       string // for the history, written on the attempt's first wait only
}

// Wait extends a held, due lease to Until. It keeps the holder, the attempt
// and FailureCount; on the attempt's first wait it sets WaitingSince to the
// deadline that passed and adds one history entry (later waits add none, so
// a long wait does not grow the record).
func Wait(r StepRecord, p WaitParams) (StepRecord, error) {
	switch {
	case p.From != Processing && p.From != Compensating:
		return r, &ValidationError{Field: "from", Reason: fmt.Sprintf("cannot wait on a %s step", p.From)}
	case p.Owner == "":
		return r, &ValidationError{Field: "owner", Reason: "only a held lease waits"}
	case !p.Until.After(p.Now):
		return r, &ValidationError{Field: "until", Reason: "the new deadline must be after now"}
	case p.DueAt.After(p.Now):
		return r, &ValidationError{Field: "dueAt", Reason: "the deadline seen has not passed"}
	}
	if r.ProcessState != p.From || r.LockedBy != p.Owner || r.Attempt != p.Attempt ||
		!r.DueAt.Equal(p.DueAt) || !r.WaitingSince.Equal(p.WaitingSince) ||
		(r.ProcessState == Processing && r.ForEachCount > 0) { // a running fan-out has no deadline: its elements do
		return r, race("wait", r)
	}
	first := r.WaitingSince.IsZero()
	if first {
		r.WaitingSince = r.DueAt
	}
	r.CompleteBy, r.DueAt, r.UpdatedAt = p.Until, p.Until, p.Now
	if first {
		r.History = append(append([]HistoryEntry(nil), r.History...), HistoryEntry{
			At: p.Now, Step: r.Step, Actor: p.Actor, From: r.ProcessState, To: r.ProcessState, Attempt: r.Attempt, Reason: p.Reason,
		})
	}
	return r, nil
}

// StartParams records that the holder's request was picked up by its
// agent (docs/protocol.md, "Deadlines start at pick-up"): the agent
// reported a late pick-up, or a redelivery. The write is fenced on the
// lease held (state, holder, attempt), whatever its deadline, so a report
// for an attempt no longer current changes nothing.
type StartParams struct {
	Key     StepKey
	From    ProcessState // Processing or Compensating, held
	Owner   string       // the holder the report names
	Attempt int          // the attempt the report names
	Now     time.Time
	// CompleteBy is the attempt's new deadline: the pick-up plus the
	// step's timeout and the reply's grace. After Now.
	CompleteBy time.Time
}

// Check rejects parameters no record could take (ErrInvalid).
func (p StartParams) Check() error {
	switch {
	case p.From != Processing && p.From != Compensating:
		return &ValidationError{Field: "from", Reason: fmt.Sprintf("cannot start a %s step", p.From)}
	case p.Owner == "":
		return &ValidationError{Field: "owner", Reason: "only a held lease starts"}
	case !p.CompleteBy.After(p.Now):
		return &ValidationError{Field: "completeBy", Reason: "the deadline must be after now"}
	}
	return nil
}

// Start sets StartedAt and moves the lease's deadline to p.CompleteBy,
// keeping the holder, the attempt and FailureCount. A report for an
// attempt already started moves the deadline only later (the reports of
// two deliveries may arrive in either order): an earlier one returns the
// record unchanged, with no write. It adds no history entry (a report
// comes with every redelivery, and the record must not grow with them):
// StartedAt shows the latest pick-up, and the outcome's entry its timing.
func Start(r StepRecord, p StartParams) (StepRecord, error) {
	if err := p.Check(); err != nil {
		return r, err
	}
	if !heldBy(r, p.From, p.Owner, p.Attempt) {
		return r, race("start", r)
	}
	// Compared as stored: a store keeps times to the millisecond.
	if !r.StartedAt.IsZero() && !r.CompleteBy.Before(p.CompleteBy.Truncate(time.Millisecond)) {
		return r, nil
	}
	r.StartedAt = p.Now
	r.CompleteBy, r.DueAt, r.UpdatedAt = p.CompleteBy, p.CompleteBy, p.Now
	return r, nil
}

// Due reports whether the supervisor should act on the record at now.
func Due(r StepRecord, now time.Time) bool {
	switch r.ProcessState {
	case Pending, Processing, Compensating:
		return !r.DueAt.IsZero() && !r.DueAt.After(now)
	}
	return false
}

func checkDue(op string, r StepRecord, from ProcessState, attempt int, now time.Time) error {
	if from != Processing && from != Pending && from != Compensating {
		return &ValidationError{Field: "from", Reason: fmt.Sprintf("cannot %s a %s step", op, from)}
	}
	if r.ProcessState != from || r.Attempt != attempt || !Due(r, now) {
		return race(op, r)
	}
	return nil
}

// checkEnd is the fence of a write that ends an attempt without an answer:
// the supervisor's (checkDue), or with holder set the attempt's holder's on
// its agent's transient outcome, which needs no deadline passed.
func checkEnd(op string, r StepRecord, from ProcessState, attempt int, holder string, now time.Time) error {
	if holder == "" {
		return checkDue(op, r, from, attempt, now)
	}
	if from != Processing && from != Compensating {
		return &ValidationError{Field: "from", Reason: fmt.Sprintf("the holder cannot %s a %s step", op, from)}
	}
	if !heldBy(r, from, holder, attempt) {
		return race(op, r)
	}
	return nil
}

func unlease(r StepRecord) StepRecord {
	r.LockedBy, r.CompleteBy, r.DueAt, r.WaitingSince, r.StartedAt = "", time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return r
}

func move(r StepRecord, to ProcessState, actor, reason string, now time.Time) StepRecord {
	r.History = append(append([]HistoryEntry(nil), r.History...), HistoryEntry{
		At: now, Step: r.Step, Actor: actor, From: r.ProcessState, To: to, Attempt: r.Attempt, Reason: reason,
	})
	r.ProcessState = to
	r.UpdatedAt = now
	return r
}

// timed records run, what the agent measured of the run whose outcome
// made the transition, in the transition's history entry (the newest).
func timed(r StepRecord, run RunTiming) StepRecord {
	if run.Known() {
		r.History[len(r.History)-1].Run = run
	}
	return r
}

func race(op string, r StepRecord) error {
	if r.ProcessState == "" {
		return &RaceError{Op: op, Key: r.Key()}
	}
	cur := r
	return &RaceError{Op: op, Key: r.Key(), Current: &cur}
}

// NewRecords builds the state records of a new order: every step Pending with
// no holder and FailureCount 0. The first step is ready (due for pick-up by
// pickupBy); later steps wait on their predecessor and stay out of the index.
// With a lease, the first step is created already claimed (attempt 1), which
// saves the separate claim write on the hot path and is the same transition
// a claim would make.
//
// Steps in skip (their conditions: skip.go) are created settled, Skipped or
// in Error, and the first step after them is the one ready (or claimed);
// after a failed one, none is.
func NewRecords(o Order, now, pickupBy time.Time, shards int, lease *ClaimParams, skip ...Skip) ([]StepRecord, error) {
	if len(o.Steps) == 0 {
		return nil, &ValidationError{Field: "steps", Reason: "an order needs at least one step"}
	}
	first := 0 // the first step to run; len(o.Steps) when none
	for _, k := range skip {
		if k.Step != first || k.Step >= len(o.Steps) {
			return nil, &ValidationError{Field: "skip", Reason: fmt.Sprintf("step %d is not the next of the first steps", k.Step)}
		}
		first++
		if k.Failed {
			first = len(o.Steps)
			break
		}
	}
	if err := checkSkips(skip, -1, nil); err != nil {
		return nil, err
	}
	out := make([]StepRecord, len(o.Steps))
	for i, name := range o.Steps {
		k := StepKey{OrderID: o.OrderID, Step: i}
		r := StepRecord{OrderID: o.OrderID, Step: i, StepName: name, Shard: ShardFor(k, shards), CreatedAt: now}
		if i == first || (i < len(o.After) && len(o.After[i]) == 0) {
			r.DueAt = pickupBy // starts with the order: the first step to run, or another that follows none (graph.go)
		}
		r = move(r, Pending, "submit", "submitted", now)
		if i < len(skip) {
			var err error
			if r, err = SkipStep(r, skip[i], "submit", now); err != nil {
				return nil, err
			}
		}
		if i == first && lease != nil {
			var err error
			lp := *lease
			lp.Key, lp.Attempt, lp.Now = k, 0, now
			if r, err = Claim(r, lp); err != nil {
				return nil, err
			}
		}
		out[i] = r
	}
	return out, nil
}

// CompletedReason is the history entry's reason of a completion (both
// stores write it).
func (p CompleteParams) CompletedReason() string {
	if p.By == "" {
		return "completed"
	}
	return BoundReason("completed by " + p.By)
}
