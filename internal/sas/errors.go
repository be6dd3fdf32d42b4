package sas

import (
	"errors"
	"fmt"
)

// Sentinel errors. Adapters translate vendor errors into these.
var (
	// ErrNotFound: the order or step does not exist.
	ErrNotFound = errors.New("not found")
	// ErrLostRace: a fenced write found the record not as the writer last saw it
	// (another scheduler claimed it, the supervisor reset it, a reply is stale).
	// The caller acknowledges and moves on; it never retries the same write.
	ErrLostRace = errors.New("lost the race")
	// ErrConflict: the write was not made because another write on the
	// same items was in flight (DynamoDB's TransactionConflict), and it
	// decided nothing: unlike ErrLostRace, the record may well still be as
	// the writer saw it. The caller makes the write again, or fails its
	// message so that a redelivery does (docs/protocol.md, "A conflict is
	// not a lost race").
	ErrConflict = errors.New("conflicted with a concurrent write; not made")
	// ErrOrderConflict: the order id exists with different content.
	ErrOrderConflict = errors.New("order id already used with different content")
	// ErrInvalid: input that can never succeed (bad message, bad parameter).
	ErrInvalid = errors.New("invalid")
)

// RaceError is an ErrLostRace that carries the record as the store found it,
// when the store could read it in the same request (DynamoDB's
// ReturnValuesOnConditionCheckFailure), so the caller can tell a duplicate of
// its own earlier success from a genuinely stale write without another read.
type RaceError struct {
	Op      string
	Key     StepKey
	Current *StepRecord // nil when the record does not exist or was not returned
}

func (e *RaceError) Error() string {
	if e.Current == nil {
		return fmt.Sprintf("%s %s: %v", e.Op, e.Key, ErrLostRace)
	}
	return fmt.Sprintf("%s %s: %v (now %s, attempt %d, locked by %q)", e.Op, e.Key, ErrLostRace,
		e.Current.ProcessState, e.Current.Attempt, e.Current.LockedBy)
}

func (e *RaceError) Unwrap() error { return ErrLostRace }

// ValidationError is an ErrInvalid with a reason an operator can read.
type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string {
	if e.Field == "" {
		return "invalid: " + e.Reason
	}
	return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason)
}

func (e *ValidationError) Unwrap() error { return ErrInvalid }
