package sas

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
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
	// Version is the version of the workflow definition the order runs on
	// (Workflow.Version; docs/workflows.md, "Versions"). "" for an order
	// submitted before versions: it runs on the registered definition.
	Version   string
	CreatedAt time.Time
	// Trace is the order's trace context (trace.go), which every message
	// about it carries; "" for an order submitted before traces. Not part
	// of ContentHash: a redelivered intake may carry another.
	Trace string
}

// ContentHash fingerprints what the submitter asked for, so a redelivered
// intake message is told apart from a different order reusing the id. The
// workflow's steps and version are not the submitter's: an intake
// redelivered after a deploy changed the workflow is the same order (it
// runs on the version it was submitted with).
func (o Order) ContentHash() string {
	canon := struct {
		W string          `json:"w"`
		P json.RawMessage `json:"p,omitempty"`
		R string          `json:"r,omitempty"`
		Q int             `json:"q,omitempty"`
	}{o.Workflow, compactJSON(o.Payload), o.ReplyTo, o.Priority}
	b, _ := json.Marshal(canon) // cannot fail: only strings, ints and valid raw JSON
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func compactJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw
	}
	b, err := json.Marshal(v) // map keys sorted: canonical enough for equality
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
}

// State summarises the order from its steps: a failed undo or one still
// running wins; then a step in flight; an order whose every step is done is
// Processed; one that failed and has its completed work undone is
// Compensated; one that failed with nothing (yet) undone is Error.
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
	switch {
	case len(v.Steps) == 0:
		return ""
	case n[CompensationFailed] > 0:
		return CompensationFailed
	case n[Compensating] > 0:
		return Compensating
	case n[Processing] > 0:
		return Processing
	case n[Processed] == len(v.Steps):
		return Processed
	case n[Compensated] > 0 && !owed:
		return Compensated
	case n[Error] > 0:
		return Error
	case n[Pending] == len(v.Steps):
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
