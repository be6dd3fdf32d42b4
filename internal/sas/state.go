// Package sas is the domain of the Scheduler Agent Supervisor system: the
// state record of an order step, its legal transitions as pure functions of
// "now", the sentinel errors, the message contracts, and the ports (state
// store, queue, clock) the adapters implement. It never imports the AWS SDK.
package sas

import (
	"fmt"
	"slices"
)

// ProcessState is the state of one step's state record (docs/pattern.md §2, §4.2).
type ProcessState string

const (
	// Pending: not started, or handed back by the supervisor for another attempt.
	Pending ProcessState = "Pending"
	// Processing: claimed by a scheduler; the agent has until CompleteBy.
	Processing ProcessState = "Processing"
	// Processed: done. Terminal unless the order is compensated.
	Processed ProcessState = "Processed"
	// Error: failed permanently or past the failure threshold; an operator was told.
	Error ProcessState = "Error"
	// Compensating: the undo of a Processed step is running (supervised like Processing).
	Compensating ProcessState = "Compensating"
	// Compensated: the undo finished. Terminal.
	Compensated ProcessState = "Compensated"
	// CompensationFailed: the undo itself gave up; an operator was told.
	CompensationFailed ProcessState = "CompensationFailed"
	// Skipped: the step's condition (StepDef.When) was false when the step
	// before it completed (or at submission): it is never called and has
	// nothing to undo. Terminal (docs/workflows.md, "Choices").
	Skipped ProcessState = "Skipped"
)

// States lists every state, in lifecycle order.
var States = []ProcessState{Pending, Processing, Processed, Error, Compensating, Compensated, CompensationFailed, Skipped}

// Rejected is an order's state, never a step's: a step was refused as a
// business outcome (agent.Reject; StepRecord.Rejected) and whatever took
// effect is undone. A final state, like Processed and Compensated, that
// needs no operator (docs/workflows.md, "A refusal that is a business
// outcome").
const Rejected ProcessState = "Rejected"

// OrderStates lists every state OrderView.State returns: a step's but
// Skipped (an order whose steps all ran or were skipped is Processed),
// Rejected and Cancelled (cancel.go).
var OrderStates = append(stepOnly(States, Skipped), Rejected, Cancelled)

// stepOnly is states without the ones only a step can be in.
func stepOnly(states []ProcessState, only ...ProcessState) []ProcessState {
	var out []ProcessState
	for _, s := range states {
		if !slices.Contains(only, s) {
			out = append(out, s)
		}
	}
	return out
}

// Valid reports whether s is a known state.
func (s ProcessState) Valid() bool {
	for _, k := range States {
		if s == k {
			return true
		}
	}
	return false
}

// Terminal reports whether no actor will move a record in this state on its own.
// Error and CompensationFailed wait for an operator.
func (s ProcessState) Terminal() bool {
	switch s {
	case Processed, Error, Compensated, CompensationFailed, Skipped:
		return true
	}
	return false
}

// Leased reports whether a record in this state is held by an owner with a deadline.
func (s ProcessState) Leased() bool { return s == Processing || s == Compensating }

// ParseState parses a state name as written in the store and on the wire.
func ParseState(v string) (ProcessState, error) {
	s := ProcessState(v)
	if !s.Valid() {
		return "", fmt.Errorf("unknown process state %q: %w", v, ErrInvalid)
	}
	return s, nil
}

// legal is the transition table. Anything absent is illegal; tests replay
// every order's history through Legal to prove no illegal transition happened.
var legal = map[ProcessState][]ProcessState{
	"":                 {Pending, Processing, Skipped, Error},           // created (Processing: claimed at submission; Skipped, or Error by its condition: settled at submission)
	Pending:            {Processing, Pending, Error, Skipped},           // claim; supervisor re-drive; give up (or a condition that cannot be evaluated); condition false
	Processing:         {Processed, Pending, Error, Processing},         // complete; rescue; fail/give up; lease extension
	Processed:          {Compensating},                                  // order is being undone
	Error:              {Pending, Compensating, Error},                  // operator resubmit; compensate the failed step's side effects; a late success noted
	Compensating:       {Compensated, Compensating, CompensationFailed}, // done; rescued or re-claimed; gave up
	CompensationFailed: {Compensating},                                  // operator retries the undo
	Compensated:        {},
	Skipped:            {},
}

// Legal reports whether a record may move from one state to another.
func Legal(from, to ProcessState) bool {
	for _, s := range legal[from] {
		if s == to {
			return true
		}
	}
	return false
}
