package sas

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Effect is something a transition owes the world beyond its write: an
// operator alert, or a request to compensate the order.
type Effect string

const (
	EffectAlert      Effect = "alert"
	EffectCompensate Effect = "compensate"
)

// GiveUpOwes is what giving up owes, by the state it leaves: every give-up
// alerts an operator, and a forward step's (Error) also asks the scheduler
// to compensate the order. A failed undo has nothing left to undo it.
func GiveUpOwes(to ProcessState) []Effect {
	if to == Error {
		return []Effect{EffectAlert, EffectCompensate}
	}
	return []Effect{EffectAlert}
}

// Owing reports whether the record still owes a give-up's effects.
func (r StepRecord) Owing() bool { return len(r.Owes) > 0 }

// OwedPartition is the index partition of records that owe effects. It is
// separate from the state partitions so that the supervisor finds owed work
// by a query whose cost grows with what is owed, never with Error records.
func OwedPartition(shard int) string { return fmt.Sprintf("Owed#%d", shard) }

// IndexEntry is where the record sits in the state/deadline index: the owed
// partition at OwedAt while it owes effects, otherwise its state's partition
// at the time Indexed gives. ok is false for records outside the index.
func (r StepRecord) IndexEntry() (partition string, at time.Time, ok bool) {
	if r.Owing() {
		return OwedPartition(r.Shard), r.OwedAt, true
	}
	at, ok = r.Indexed()
	if !ok {
		return "", time.Time{}, false
	}
	return IndexPartition(r.ProcessState, r.Shard), at, true
}

// AlertID is the stable id of the alert about one step reaching a state at
// one attempt: the same give-up re-driven any number of times has one id.
func AlertID(k StepKey, state ProcessState, attempt int) string {
	return fmt.Sprintf("%s/%d/%s/%d", k.OrderID, k.Step, state, attempt)
}

// OwedAlert is the alert a given-up record owes, rebuilt from the record
// alone: while it owes, nothing but Settle or the compensation claim changes
// it, so every re-send is the same alert with the same id.
func (r StepRecord) OwedAlert(source string) Alert {
	return Alert{
		ID: AlertID(r.Key(), r.ProcessState, r.Attempt), OrderID: r.OrderID, Step: r.Step, StepName: r.StepName,
		State: r.ProcessState, Reason: r.LastError, Attempts: r.Attempt, Failures: r.FailureCount,
		At: r.UpdatedAt, Source: source,
	}
}

// GivenUpBy is the source of r's give-up, for its owed alert: "scheduler"
// when the scheduler gave it up on its agent's report (docs/protocol.md, "A
// failure is not a wait"), "supervisor" otherwise.
func (r StepRecord) GivenUpBy() string {
	for i := len(r.History) - 1; i >= 0; i-- {
		if h := r.History[i]; h.To == r.ProcessState && h.From != h.To {
			if strings.HasPrefix(h.Actor, "supervisor") {
				return "supervisor"
			}
			return "scheduler"
		}
	}
	return "supervisor"
}

// OwedCompensate is the compensate request a given-up forward step owes.
func (r StepRecord) OwedCompensate(actor string) Compensate {
	return Compensate{
		V: MessageVersion, Kind: KindCompensate, OrderID: r.OrderID, Actor: actor,
		Reason:  fmt.Sprintf("step %d (%s) gave up: %s", r.Step, r.StepName, r.LastError),
		GivenUp: &GivenUp{Step: r.Step, Attempt: r.Attempt},
	}
}

// SettleParams clears what a give-up owed once all of it went out, fenced
// on the state and attempt the give-up left.
//
// With Recheck set, what is owed stays owed and is due again at Recheck:
// the supervisor's write once it has sent a give-up's compensate request.
// That request is settled by the compensation it starts (the scheduler's
// claim, claimSettles, or its Settle when there is nothing to claim), not
// by its send: a request that then dies in its queue (dead-lettered in an
// outage) is sent again at Recheck (docs/decisions.md, "A give-up's
// effects are owed until sent"; issue 29, N6).
type SettleParams struct {
	Key     StepKey
	State   ProcessState
	Attempt int
	Recheck time.Time
	// OwedAt is when the record, as read, was due: a Recheck is fenced on
	// it too, so that a retry of the same write (its first commit's answer
	// lost) loses the race instead of moving the entry again.
	OwedAt time.Time
}

// Settle clears the owed effects, or with p.Recheck moves when they are
// due again. It is no transition of the step (no history entry, UpdatedAt
// kept, so the alert rebuilt from the record stays the same); it only
// moves the index entry: back to the state's partition, or within the owed
// partition.
func Settle(r StepRecord, p SettleParams) (StepRecord, error) {
	if !MayOwe(p.State) {
		return r, &ValidationError{Field: "state", Reason: fmt.Sprintf("%s records owe nothing", p.State)}
	}
	if r.ProcessState != p.State || r.Attempt != p.Attempt || !r.Owing() {
		return r, race("settle", r)
	}
	if !p.Recheck.IsZero() {
		if !r.OwedAt.Equal(p.OwedAt) {
			return r, race("settle", r)
		}
		r.OwedAt = p.Recheck
		return r, nil
	}
	r.Owes, r.OwedAt = nil, time.Time{}
	return r, nil
}

// OwesCompensate reports whether r still owes its give-up's compensate
// request: one that is settled by the compensation it starts.
func (r StepRecord) OwesCompensate() bool { return slices.Contains(r.Owes, EffectCompensate) }

// FindOwedParams asks for up to Limit records per index shard whose owed
// effects are due for a (re)send at Now.
type FindOwedParams struct {
	Now   time.Time
	Limit int // 0: DefaultPageLimit
}

// WithDefaults returns p with the default Limit filled in.
func (p FindOwedParams) WithDefaults() FindOwedParams {
	if p.Limit <= 0 {
		p.Limit = DefaultPageLimit
	}
	return p
}

// OwedStore is the part of the state store that keeps a give-up's effects
// owed until they went out (implemented by every StateStore).
type OwedStore interface {
	// FindOwed returns records whose owed effects are due at p.Now, oldest
	// first, from the owed partitions of the index.
	FindOwed(ctx context.Context, p FindOwedParams) (FindDueResult, error)
	// Settle clears a record's owed effects (fenced: ErrLostRace when the
	// record moved on or was settled already).
	Settle(ctx context.Context, p SettleParams) (StepRecord, error)
}

// owe records what a give-up to state `to` owes.
func owe(r StepRecord, to ProcessState, p GiveUpParams) StepRecord {
	r.Owes = GiveUpOwes(to)
	r.OwedAt = p.OwedAt
	if r.OwedAt.IsZero() {
		r.OwedAt = p.Now
	}
	return r
}

// claimSettles: the compensation claim of a step in Error or
// CompensationFailed is what the owed compensate request asks for, and the
// supervisor raises a give-up's alert before it sends that request, so a
// claim clears what is owed. (An operator's own compensate can come first;
// the operator is then the one the alert was for.)
func claimSettles(r StepRecord, from ProcessState) StepRecord {
	if from == Error || from == CompensationFailed {
		r.Owes, r.OwedAt = nil, time.Time{}
	}
	return r
}

// resubmitOwing refuses to resubmit a step whose give-up has not yet sent
// everything it owes: its order is about to be compensated, and its alert
// may not have reached anyone.
func resubmitOwing(r StepRecord) error {
	if !r.Owing() {
		return nil
	}
	return &ValidationError{Field: "step", Reason: fmt.Sprintf("step %s cannot be resubmitted yet: its give-up still owes %v (the supervisor re-sends it; try again once it has gone out)", r.Key(), r.Owes)}
}

// MayOwe reports whether records in a state can owe effects (the states a
// give-up leaves), so a listing of it must read the owed partitions too.
func MayOwe(s ProcessState) bool { return s == Error || s == CompensationFailed }

// SortByOwedAt orders records by when their owed effects are due (stable).
func SortByOwedAt(rs []StepRecord) {
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].OwedAt.Before(rs[j].OwedAt) })
}
