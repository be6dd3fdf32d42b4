package sas

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// FanOutStore holds a fan-out's element records (fanout.go). It is its own
// port while fan-out is built: the in-memory store and DynamoDB's implement
// it, the wrappers around them (the simulator's, the tests') not yet; the
// scheduler asks its store for it and fails a fan-out, named, on one that
// has not.
type FanOutStore interface {
	// StartFanOut records a claimed fan-out step's count and claims its
	// first elements, in one write (StartFanOutParams).
	StartFanOut(ctx context.Context, p StartFanOutParams) ([]StepRecord, error)
	// CompleteElement completes an element, counts it on its step and
	// claims the next element, in one write (CompleteElementParams).
	CompleteElement(ctx context.Context, p CompleteElementParams) ([]StepRecord, error)
	// ListElements reads the element records of one step, in index order,
	// a page at a time: never part of GetOrder.
	ListElements(ctx context.Context, p ListElementsParams) (ListElementsResult, error)
}

// ElementClaim creates the element Index of a fan-out claimed by the
// writer: Processing, attempt 1, leased until CompleteBy, with its Item.
type ElementClaim struct {
	Index      int
	Item       json.RawMessage
	CompleteBy time.Time
}

// StartFanOutParams starts the fan-out of the step Key, which Owner holds
// at Attempt (its claim, as any step's): the step records Count elements
// and stops being due (its elements are, each on its own), and the
// elements in Claims (the first window: indices 0.., at most
// MaxConcurrency) are created claimed.
type StartFanOutParams struct {
	Key     StepKey
	Owner   string
	Attempt int
	Now     time.Time
	Count   int
	Claims  []ElementClaim
	// StepName and Generation are the step's, which its elements take.
	StepName   string
	Generation int
}

// Check rejects parameters no fan-out could take.
func (p StartFanOutParams) Check() error {
	switch {
	case IsElement(p.Key.Step):
		return &ValidationError{Field: "key", Reason: fmt.Sprintf("step %d is an element, not a step", p.Key.Step)}
	case p.Count < 1 || p.Count > MaxForEach:
		return &ValidationError{Field: "count", Reason: fmt.Sprintf("%d: a started fan-out has 1 to %d elements (none completes its step at once)", p.Count, MaxForEach)}
	case len(p.Claims) < 1 || len(p.Claims) > min(p.Count, MaxConcurrency):
		return &ValidationError{Field: "claims", Reason: fmt.Sprintf("%d: the first window claims 1 to %d elements", len(p.Claims), min(p.Count, MaxConcurrency))}
	}
	for i, c := range p.Claims {
		if c.Index != i || c.Item == nil || c.CompleteBy.IsZero() {
			return &ValidationError{Field: "claims", Reason: fmt.Sprintf("claim %d: the window is elements 0.. in order, each with its item and lease", i)}
		}
	}
	return nil
}

// StartFanOut is the fan-out step's part of StartFanOutParams: fenced on
// its holder and attempt, and on no cancel's mark (a step its order's
// cancel marked before its fan-out started starts no element), it takes
// the count and leaves the index (its elements carry the deadlines); it
// keeps its holder, whose completion of the step, when the last element is
// done, is fenced on it.
func StartFanOut(r StepRecord, p StartFanOutParams) (StepRecord, error) {
	if !heldBy(r, Processing, p.Owner, p.Attempt) || r.ForEachCount != 0 || r.Cancelled {
		return r, race("start fan-out", r)
	}
	r.ForEachCount, r.ForEachDone = p.Count, 0
	r.CompleteBy, r.DueAt, r.WaitingSince, r.StartedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return move(r, Processing, p.Owner, fmt.Sprintf("fan-out over %d elements", p.Count), p.Now), nil
}

// NewElement is the record of a claimed element of step (named name, at
// generation), as StartFanOut and CompleteElement create it.
func NewElement(step StepKey, name string, generation int, c ElementClaim, owner string, now time.Time, shards int) StepRecord {
	r := StepRecord{OrderID: step.OrderID, Step: ElementStep(step.Step, c.Index), StepName: name, ProcessState: Pending,
		Generation: generation, CreatedAt: now, UpdatedAt: now, Item: c.Item}
	r.Shard = ShardFor(r.Key(), shards)
	r.Attempt = 1
	r.LockedBy, r.CompleteBy, r.DueAt = owner, c.CompleteBy, c.CompleteBy
	return move(r, Processing, owner, fmt.Sprintf("claimed (element %d)", c.Index), now)
}

// CompleteElementParams completes the element Key, held by Owner at
// Attempt, with its Result; counts it on its step's record (ForEachDone),
// fenced on the step being the running fan-out it was; and, with Next,
// creates the next element claimed (index Key's + the window), in the same
// write.
type CompleteElementParams struct {
	Key     StepKey
	Owner   string
	Attempt int
	Now     time.Time
	Result  json.RawMessage
	Run     RunTiming
	Next    *ElementClaim
	// StepName and Generation are the step's, which Next takes.
	StepName   string
	Generation int
}

// Check rejects parameters no element could take.
func (p CompleteElementParams) Check() error {
	if !IsElement(p.Key.Step) {
		return &ValidationError{Field: "key", Reason: fmt.Sprintf("step %d is a step, not an element", p.Key.Step)}
	}
	if n := p.Next; n != nil {
		_, i := ElementOf(p.Key.Step)
		if n.Index <= i || n.Index >= MaxForEach || n.Item == nil || n.CompleteBy.IsZero() {
			return &ValidationError{Field: "next", Reason: fmt.Sprintf("the next element %d is not after %d, or has no item or lease", n.Index, i)}
		}
	}
	if len(p.Result) > MaxResultBytes {
		return &ValidationError{Field: "result", Reason: fmt.Sprintf("%d bytes, more than %d", len(p.Result), MaxResultBytes)}
	}
	return nil
}

// CompleteElement is the element's part: fenced on its holder and attempt,
// Processing → Processed with its result. An element marked (its fan-out
// stopped or its order cancelled: CancelStep) is refused: it settles alone,
// by Complete with Cancelled, and counts nothing.
func CompleteElement(r StepRecord, p CompleteElementParams) (StepRecord, error) {
	if !heldBy(r, Processing, p.Owner, p.Attempt) || r.Cancelled {
		return r, race("complete element", r)
	}
	r = unlease(r)
	r.Result = p.Result
	return timed(move(r, Processed, p.Owner, "completed", p.Now), p.Run), nil
}

// CountElement is the step's part of CompleteElementParams: a running
// fan-out (Processing, started, not all done) counts one more element done.
func CountElement(step StepRecord, p CompleteElementParams) (StepRecord, error) {
	if step.ProcessState != Processing || step.ForEachCount == 0 || step.ForEachDone >= step.ForEachCount || step.Cancelled {
		return step, race("count element", step)
	}
	step.ForEachDone++
	step.UpdatedAt = p.Now
	return step, nil
}

// ListElementsParams pages through the elements of step Key.
type ListElementsParams struct {
	Key    StepKey // the fan-out step
	Limit  int     // 0: DefaultPageLimit
	Cursor string  // from the previous page; "" for the first
}

// ListElementsResult is one page, in index order.
type ListElementsResult struct {
	Records    []StepRecord
	NextCursor string
	Stats      ReadStats
}
