package sas

import (
	"fmt"
	"time"
)

// Choices (docs/workflows.md, "Choices"): a step with a condition
// (StepDef.When) runs only when it holds. The scheduler evaluates the
// conditions of the steps after one when that step completes (and of the
// first steps at submission), and the write that claims the next step to
// run also settles the steps it passes over: each is Skipped (its
// condition was false) or, for the one whose condition could not be
// evaluated, in Error with the reason (a permanent failure of a step that
// was never called: nothing after it is claimed and the order is
// compensated). Neither is ever called.

// Skip is a step a completion or a submission settles without running it.
type Skip struct {
	Step   int
	Reason string // why: the condition and what it gave
	// Failed: the condition could not be evaluated (a missing field, its
	// cost limit, a result that is not a bool). The step goes to Error
	// instead of Skipped, failed by ByCondition.
	Failed bool
}

// ByCondition is the FailedBy of a step in Error because its condition
// could not be evaluated: no attempt of it ever ran, so no reply matches
// it, and it has nothing to undo (unless an operator's resubmit ran it).
const ByCondition = "condition"

// To is the state a skip leaves its step in.
func (k Skip) To() ProcessState {
	if k.Failed {
		return Error
	}
	return Skipped
}

// checkSkips rejects skips no order could take: each after step (the
// completed step, or -1 at submission), in order, none of them next, and
// only the last one failed, with no next after it.
func checkSkips(skips []Skip, after int, next *ClaimParams) error {
	prev := after
	for i, k := range skips {
		switch {
		case k.Step <= prev:
			return &ValidationError{Field: "skip", Reason: fmt.Sprintf("step %d is not after step %d", k.Step, prev)}
		case next != nil && k.Step >= next.Key.Step:
			return &ValidationError{Field: "skip", Reason: fmt.Sprintf("step %d is not before the next step %d", k.Step, next.Key.Step)}
		case k.Failed && (i != len(skips)-1 || next != nil):
			return &ValidationError{Field: "skip", Reason: fmt.Sprintf("step %d failed its condition: nothing follows it", k.Step)}
		}
		prev = k.Step
	}
	return nil
}

// checkGraphSkips is checkSkips for a completion in a graph: the skips are
// the steps the completion made ready whose conditions are false, in any
// order but each once and none the completed step; a failed one is the
// only one, with no claim beside it (nothing new starts after a failure).
func checkGraphSkips(skips []Skip, done int, next *ClaimParams) error {
	seen := map[int]bool{done: true}
	for _, k := range skips {
		switch {
		case k.Step < 0 || seen[k.Step]:
			return &ValidationError{Field: "skip", Reason: fmt.Sprintf("step %d is no step, the completed one, or repeated", k.Step)}
		case k.Failed && (len(skips) != 1 || next != nil):
			return &ValidationError{Field: "skip", Reason: fmt.Sprintf("step %d failed its condition: nothing is skipped or claimed beside it", k.Step)}
		}
		seen[k.Step] = true
	}
	return nil
}

// SkipStep settles a step that was never claimed (Pending at attempt 0,
// no holder) without running it: Skipped, or Error when k.Failed. The
// fence is a claim's: a step after the one running has never been claimed.
func SkipStep(r StepRecord, k Skip, actor string, now time.Time) (StepRecord, error) {
	if r.ProcessState != Pending || r.LockedBy != "" || r.Attempt != 0 {
		return r, race("skip", r)
	}
	r.DueAt = time.Time{}
	if k.Failed {
		r.LastError, r.FailedBy, r.Refused = k.Reason, ByCondition, true
	}
	return move(r, k.To(), actor, k.Reason, now), nil
}

// ErrorCondition names the failure of a step whose condition could not be
// evaluated: its reason (the step's LastError, the failed status) starts
// with it.
const ErrorCondition = "ConditionFailed"

// LastHistoryReason is the reason of the record's newest history entry: a
// skipped step's says why it was skipped.
func (r StepRecord) LastHistoryReason() string {
	if len(r.History) == 0 {
		return ""
	}
	return r.History[len(r.History)-1].Reason
}
