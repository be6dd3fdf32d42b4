package sas

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"time"
)

// StepKey names one step's state record.
type StepKey struct {
	OrderID string
	Step    int // 0-based index in the workflow
}

func (k StepKey) String() string { return fmt.Sprintf("%s/%d", k.OrderID, k.Step) }

// StepRecord is the state record of one step (docs/pattern.md §4.2).
//
// Zero times mean null: a new record has no LockedBy, no CompleteBy.
type StepRecord struct {
	OrderID      string
	Step         int
	StepName     string
	ProcessState ProcessState
	LockedBy     string    // the instance holding the lease; "" when none
	CompleteBy   time.Time // the lease deadline; zero when not leased
	FailureCount int       // times the supervisor found the step stuck or stranded
	// Attempt is the fencing token: each claim and each resubmit increments
	// it (so every event of a step has an attempt of its own), and every write
	// of a running step is conditional on the attempt the writer holds.
	Attempt int
	// DueAt is when the supervisor must look at the record: CompleteBy while
	// leased, the pick-up deadline while Pending and ready. Zero for a Pending
	// step that waits on an earlier step, and for terminal records.
	DueAt time.Time
	// Shard is the index write shard, ShardFor(key, shards) as computed by the
	// last writer: every write can compute it from the key alone, without a read.
	Shard     int
	LastError string
	CreatedAt time.Time
	UpdatedAt time.Time
	History   []HistoryEntry

	// What control flow needs to know about a step's outcome is written
	// down here, never read back from History (docs/protocol.md, "Explicit
	// fields").
	//
	// FailedBy is who moved the step to Error or CompensationFailed: the
	// holder of the attempt (an agent's failed reply) or the supervisor.
	FailedBy string
	// Refused is set when the step's Error was a permanent failure the
	// agent reported for the attempt: the remote refused, so unless
	// UndoOwed is set there is nothing to undo.
	Refused bool
	// UndoOwed is set when a done reply was seen for the step while it was
	// not Processed (a success that arrived after a refusal or a rescue):
	// the step's effect may exist, so compensating the order undoes it.
	UndoOwed bool
	// Generation is part of the step's idempotency key. An operator's
	// resubmit of a refused step with no effect starts a new generation, so
	// a remote that stored the refusal does not replay it.
	Generation int
	// Rejected is set when the step's Error was a business rejection the
	// agent reported (agent.Reject): the order ends Rejected once what
	// took effect is undone, and no operator is alerted.
	Rejected bool
	// Cancelled is set on the step an order's cancel landed on
	// (CancelStep): the order ends Cancelled once the step settled and
	// what took effect is undone, and no operator is alerted.
	Cancelled bool

	// Result is what the step returned when it completed (compacted JSON,
	// at most MaxResultBytes; nil for none): carried to the requests of
	// the steps after it and of its own undo (docs/protocol.md, "Results").
	Result json.RawMessage

	// The fan-out's counters (fanout.go), on a fan-out step's record once
	// it started: how many elements its list has and how many completed.
	// Zero on every other record.
	ForEachCount, ForEachDone int
	// Item is an element record's element of its step's list (compacted
	// JSON), carried in its requests; nil on a step's record.
	Item json.RawMessage

	// What a give-up still owes (docs/decisions.md, "A give-up's effects
	// are owed until sent"): set by GiveUp in the same write, cleared by
	// Settle once every effect went out, or by the compensation claim that
	// the owed request asked for. Nil/zero when nothing is owed.
	Owes   []Effect
	OwedAt time.Time // when a sweep (re)sends what is owed

	// WaitingSince is the first deadline of the current attempt that the
	// supervisor let pass because no pick-up was reported (Wait,
	// docs/protocol.md "Deadlines start at pick-up"): the request's
	// delivery horizon counts from it. Zero when the attempt never waited;
	// every write that ends the lease clears it.
	WaitingSince time.Time
	// StartedAt is when the scheduler recorded that the current attempt's
	// request was picked up (Start): its agent reports a pick-up that came
	// too late to finish by CompleteBy, and every redelivery
	// (docs/protocol.md, "Deadlines start at pick-up"). Zero while no
	// pick-up was reported: the request may still wait in its queue, and
	// the supervisor does not count a failure or send it again while it
	// can still be delivered. Every claim starts without it and every write
	// that ends the lease clears it.
	StartedAt time.Time
}

// Key returns the record's key.
func (r StepRecord) Key() StepKey { return StepKey{OrderID: r.OrderID, Step: r.Step} }

// HistoryEntry is one transition of a step: who moved it, what, when and why.
type HistoryEntry struct {
	At      time.Time
	Step    int
	Actor   string
	From    ProcessState // "" for creation
	To      ProcessState
	Attempt int
	Reason  string
	// Run is what the agent measured of the run whose outcome made this
	// transition (its reply's queuedMs and ranMs): on the entries of a
	// done, failed or transient reply; zero elsewhere, and from an agent
	// built before the fields. For people only (the console).
	Run RunTiming
}

// HistoryLimit bounds a step's history. Transitions per attempt are bounded
// (claim, then one of complete/fail/rescue), attempts per resubmission are
// bounded by the supervisor's failure threshold, and Resubmit trims the
// history to the newest HistoryLimit-1 entries before it appends.
const HistoryLimit = 64

// Order is the business item of the orders table.
type Order struct {
	OrderID  string
	Workflow string
	Payload  json.RawMessage // a JSON object, or nil
	ReplyTo  string
	Priority int
	Steps    []string // step names in workflow order
	// After is the workflow's graph, each step's predecessors by index
	// (Workflow.After), so that the order's view knows its branches
	// without its definition: nil for a workflow that is not a graph (each
	// step follows the one before it). Not part of ContentHash.
	After [][]int
	// Version is the version of the workflow definition the order runs on
	// (Workflow.Version; docs/workflows.md, "Versions"). "" for an order
	// submitted before versions: it runs on the registered definition.
	Version   string
	CreatedAt time.Time
	// Trace is the order's trace context (trace.go), which every message
	// about it carries; "" for an order submitted before traces. Not part
	// of ContentHash: a redelivered intake may carry another.
	Trace string
	// Submitter is who sent the intake, as SQS reports it (SubmitterOf its
	// SenderId): "" when the queue does not say (a local run), and for an
	// order stored before submitters were recorded. Not part of
	// ContentHash: an order id is the submitter's, and another sender's
	// intake under it is told nothing about it (docs/trust.md).
	Submitter string
}

// SubmitterOf is the principal an SQS SenderId names: a role's or a user's
// unique id (AROA…, AIDA…) or an account, without the session name an
// assumed role's carries (AROA…:i-0abc, AROA…:my-function), which differs
// between the instances of one application.
func SubmitterOf(senderID string) string {
	principal, _, _ := strings.Cut(senderID, ":")
	return principal
}

// SameSubmitter reports whether an intake from submitter may act on the
// order o as its own: it came from o's submitter, or o's is not known.
func (o Order) SameSubmitter(submitter string) bool {
	return o.Submitter == "" || o.Submitter == submitter
}

// ContentHash fingerprints what the submitter asked for, so a redelivered
// intake message is told apart from a different order reusing the id. The
// workflow's steps and version are not the submitter's: an intake
// redelivered after a deploy changed the workflow is the same order (it
// runs on the version it was submitted with).
//
// The payload is compared by its JSON, not by what a float64 makes of it:
// key order and spacing aside, numbers are compared as written, so two
// payloads that differ past 2^53 (or in a digit a float64 rounds away)
// are two orders. The hash starts with contentHashPrefix; a hash without
// it was stored by a build before, and SameContent compares with it as
// that build did.
func (o Order) ContentHash() string {
	return contentHashPrefix + o.contentHash(exactJSON)
}

// contentHashPrefix marks a ContentHash of exact payload numbers.
const contentHashPrefix = "x1."

// SameContent reports whether o is what the order whose ContentHash is
// stored asked for: a redelivery of it, not another order reusing its id.
func (o Order) SameContent(stored string) bool {
	if strings.HasPrefix(stored, contentHashPrefix) {
		return stored == o.ContentHash()
	}
	return stored == o.contentHash(floatJSON) // stored before exact numbers
}

func (o Order) contentHash(canonical func(json.RawMessage) json.RawMessage) string {
	canon := struct {
		W string          `json:"w"`
		P json.RawMessage `json:"p,omitempty"`
		R string          `json:"r,omitempty"`
		Q int             `json:"q,omitempty"`
	}{o.Workflow, canonical(o.Payload), o.ReplyTo, o.Priority}
	b, _ := json.Marshal(canon) // cannot fail: only strings, ints and valid raw JSON
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// exactJSON is raw re-encoded with its object keys sorted and its numbers
// as written (json.Number).
func exactJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	b, err := json.Marshal(v) // map keys sorted
	if err != nil {
		return raw
	}
	return b
}

// floatJSON is the canonical form of builds before exact numbers, which
// read every number as a float64: kept to compare with their stored hashes.
func floatJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return b
}

// OrderView is an order with its step records and merged history.
type OrderView struct {
	Order   Order
	Steps   []StepRecord
	History []HistoryEntry // all steps, oldest first
	// Def is the definition the order runs on, when whoever read the view
	// knows it (Definitions.Attach): with it, State and Settled tell a
	// Processed step that has no undo (it stays Processed for good) from
	// one still owed its undo. nil: they judge from the records alone,
	// which cannot tell the two apart.
	Def *Workflow `json:"-"`
}

// undoOwed reports, from the definition, whether step r of an order that
// failed or was cancelled still has its undo to come: it has an undo and
// took effect (Processed), or may have (Error, as the scheduler's
// compensation reads it; a step whose condition could not be evaluated
// was never called). known is false without a definition that names the
// step.
func (v OrderView) undoOwed(r StepRecord) (owed, known bool) {
	if v.Def == nil || r.Step < 0 || r.Step >= len(v.Def.Steps) {
		return false, false
	}
	if v.Def.Steps[r.Step].Undo == "" {
		return false, true
	}
	switch r.ProcessState {
	case Processed:
		return true, true
	case Error:
		return r.FailedBy != ByCondition || r.UndoOwed, true
	}
	return false, true
}

// owedByDef reports whether any step still has its undo to come (undoOwed)
// counting Error steps or not, and whether the definition knew every step.
func (v OrderView) owedByDef(withErrors bool) (owed, known bool) {
	for _, r := range v.Steps {
		o, k := v.undoOwed(r)
		if !k {
			return false, false
		}
		if o && (withErrors || r.ProcessState != Error) {
			owed = true
		}
	}
	return owed, true
}

// undoFailed reports whether an undo of the order failed: its compensation
// stops there, and what is left waits for an operator.
func (v OrderView) undoFailed() bool {
	return slices.ContainsFunc(v.Steps, func(r StepRecord) bool { return r.ProcessState == CompensationFailed })
}

// Settled reports whether nothing will move an order on its own any more:
// no step in flight or ready, no claim or undo on its way. A failed undo
// settles it: what is below waits for an operator.
func (v OrderView) Settled() bool {
	if len(v.Steps) == 0 {
		return false
	}
	if v.Cancelled() {
		// No successor is claimed after a cancelled step, and what is
		// undone is claimed by the write that settles the step: with the
		// definition, a step still owed its undo is that claim to come,
		// unless an undo failed, which stops the compensation where it is
		// (as below).
		if !v.cancelSettled() {
			return false
		}
		if v.undoFailed() {
			return true
		}
		owed, _ := v.owedByDef(true)
		return !owed
	}
	for _, r := range v.Steps {
		switch r.ProcessState {
		case Processing, Compensating:
			return false
		case Pending:
			if !r.DueAt.IsZero() {
				return false // ready: somebody will claim it
			}
		}
	}
	// A Pending step waiting on a Processed predecessor is not settled (its
	// claim is on its way); nor is a failed order with completed steps (their
	// undo is on its way).
	failed, undone := false, false
	for i, r := range v.Steps {
		if v.Order.After == nil && r.ProcessState == Pending && i > 0 && v.Steps[i-1].ProcessState == Processed {
			return false
		}
		if r.ProcessState == Error {
			failed = true
		}
		undone = undone || r.ProcessState == Compensated
	}
	if v.Order.After != nil && !v.graphSettled() {
		return false
	}
	if owed, known := v.owedByDef(false); known && (failed || undone) {
		// With the definition, a compensation is over when no step that
		// has an undo is left Processed, or when an undo failed (the rest
		// waits for an operator).
		if v.undoFailed() {
			return true
		}
		return !owed
	}
	if failed {
		// A failed undo stops the compensation where it is: the
		// Processed steps below it wait for an operator, not for an
		// undo on its way (without this, WaitTerminal never returned
		// for such an order and the demo counted it as never settled).
		if v.undoFailed() {
			return true
		}
		for _, r := range v.Steps {
			if r.ProcessState == Processed {
				return false
			}
		}
	}
	return true
}

// State summarises the order from its steps: a failed undo or one still
// running wins; then a step in flight; an order whose every step is done (or
// skipped) is Processed; one that failed and has its completed work undone is
// Compensated; one that failed with nothing (yet) undone is Error; one whose
// only failure is a business rejection is Rejected instead of either; a
// cancelled one is Cancelled once nothing of it runs (between its step's
// settling and the claim of its first undo, made by the same message, it
// reads Cancelled already, as a failed one reads Error, unless the view
// carries its definition: then it reads Processing until that claim).
// Without the definition (Def), a Processed step is judged owed its undo
// by where it stands among the undone ones; with it, by whether it has one.
func (v OrderView) State() ProcessState {
	n := map[ProcessState]int{}
	lowestUndone := -1 // the earliest Compensated step
	for _, r := range v.Steps {
		n[r.ProcessState]++
		if r.ProcessState == Compensated && (lowestUndone < 0 || r.Step < lowestUndone) {
			lowestUndone = r.Step
		}
	}
	// Undos run newest first, so a Processed step before the earliest undone
	// one is still owed its undo; one after it has no Undo (shipping) and
	// stays Processed for good. Counting every Processed step, as this did,
	// read an order an operator compensated after it completed ([Compensated,
	// Compensated, Processed] in the reference order) as Processing forever.
	owed := false
	for _, r := range v.Steps {
		if r.ProcessState == Processed && r.Step < lowestUndone {
			owed = true
		}
	}
	if v.Order.After != nil {
		owed = v.owedInGraph()
	}
	// The definition says which steps have an undo: a Processed step
	// without one (a wait, a step with nothing to undo) is never owed,
	// wherever it stands; one with one always is (read with the records
	// alone, [Processed without undo, Compensated] was Processing forever).
	byDef, known := v.owedByDef(false)
	if known {
		owed = byDef
	}
	cancelOwed, _ := v.owedByDef(true)
	// A business rejection (a step's Rejected) ends the order Rejected
	// where it would end Compensated, or Error with only rejected steps in
	// Error: no operator has anything to do.
	rejected, othersFailed := false, false
	for _, r := range v.Steps {
		rejected = rejected || r.Rejected
		othersFailed = othersFailed || (r.ProcessState == Error && !r.Rejected)
	}
	switch {
	case len(v.Steps) == 0:
		return ""
	case n[CompensationFailed] > 0:
		return CompensationFailed
	case n[Compensating] > 0:
		return Compensating
	case n[Processing] > 0:
		return Processing
	case v.Cancelled() && v.cancelSettled() && !cancelOwed:
		return Cancelled
	case v.Cancelled():
		return Processing // a step ready to be claimed: the cancel turns it away
	case n[Processed]+n[Skipped] == len(v.Steps):
		return Processed // every step ran or was skipped (its condition was false)
	case n[Compensated] > 0 && !owed && rejected && !othersFailed:
		return Rejected
	case n[Compensated] > 0 && !owed:
		return Compensated
	case n[Error] > 0 && rejected && !othersFailed:
		return Rejected
	case n[Error] > 0:
		return Error
	case n[Pending] > 0 && n[Pending]+n[Skipped] == len(v.Steps):
		return Pending
	}
	return Processing
}

// MergeHistory merges the steps' histories, oldest first, stable by step.
func MergeHistory(steps []StepRecord) []HistoryEntry {
	var out []HistoryEntry
	for _, s := range steps {
		out = append(out, s.History...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].At.Equal(out[j].At) {
			return out[i].At.Before(out[j].At)
		}
		return out[i].Step < out[j].Step
	})
	return out
}

// ShardFor spreads records over the deadline index's write shards. Writers
// compute it from the key, so after the shard count grows a record moves to
// its new shard on its next write and sweeps (which query every shard below
// the new count) still find it. Never decrease the count while records are in
// flight: entries in the dropped shards would not be swept.
func ShardFor(k StepKey, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := fnv.New32a()
	fmt.Fprintf(h, "%s#%d", k.OrderID, k.Step)
	return int(h.Sum32() % uint32(shards))
}

// Indexed reports whether a record in this state belongs in the sparse
// state/deadline index, and under which time. Processed and Compensated
// records, and Pending steps waiting on an earlier step, stay out of it, so
// the index holds only what is in flight or needs an operator.
func (r StepRecord) Indexed() (at time.Time, ok bool) {
	switch r.ProcessState {
	case Pending:
		return r.DueAt, !r.DueAt.IsZero()
	case Processing, Compensating:
		if r.ProcessState == Processing && r.ForEachCount > 0 {
			// A running fan-out: its elements carry the deadlines and are
			// indexed each (fanout.go).
			return time.Time{}, false
		}
		return r.DueAt, true
	case Error, CompensationFailed:
		return r.UpdatedAt, true
	}
	return time.Time{}, false
}

// SortByDue orders records oldest deadline first (stable).
func SortByDue(rs []StepRecord) {
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].DueAt.Before(rs[j].DueAt) })
}

// SortByIndexTime orders records by their index time, oldest first (stable):
// the order a merged page of several index shards is presented in.
func SortByIndexTime(rs []StepRecord) {
	sort.SliceStable(rs, func(i, j int) bool {
		a, _ := rs[i].Indexed()
		b, _ := rs[j].Indexed()
		return a.Before(b)
	})
}

// IndexPartition is the partition key of a record's index entry: state and shard.
func IndexPartition(s ProcessState, shard int) string { return fmt.Sprintf("%s#%d", s, shard) }
