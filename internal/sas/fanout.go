package sas

import (
	"encoding/json"
	"fmt"

	"github.com/sas-go/sas/internal/condition"
)

// Fan-out over a list (docs/workflows.md, "Fan-out over a list";
// docs/decisions.md, "Fan-out elements are records of their own"): a step
// with ForEach runs once per element of a list taken from the order. Each
// element is a state record of its own in the order's partition, at a sort
// key past every step's (ElementStep), so the order's ordinary reads, a
// range of step keys below ElementBase, never read them. An element's
// record is a step record in every other way: claimed, completed, failed,
// rescued and given up by the same fenced writes, its deadline kept by the
// supervisor through the state-due index under its step's name (and so its
// step's limits and retry policy), its requests and replies naming it by
// its key.

// Fan-out limits.
const (
	// ElementBase separates steps' sort keys from elements': steps are
	// 0..MaxSteps-1, far below it, and the element of index i of step s is
	// at (s+1)·ElementBase + i, i < MaxForEach < ElementBase.
	ElementBase = 100_000
	// MaxForEach bounds the elements of one fan-out: a longer list fails
	// its step (workflow.MaxForEach).
	MaxForEach = 1000
	// MaxConcurrency bounds ForEach.Concurrency: the window of elements one
	// write opens when the step starts (workflow.MaxConcurrency).
	MaxConcurrency = 50
	// DefaultConcurrency is the window of a ForEach that sets none
	// (workflow.DefaultConcurrency).
	DefaultConcurrency = 10
)

// ErrorForEachItems names the failure of a fan-out step whose list could not
// be evaluated: not a list, more than MaxForEach elements, a missing field,
// its cost limit passed. A permanent failure, as a condition's.
const ErrorForEachItems = "ForEachItems"

// Item is one element of a fan-out's list, or one element's result, as
// compacted JSON.
type Item = json.RawMessage

// ForEach makes a step a fan-out: Items is a CEL list expression over
// payload, results and order (internal/condition), Concurrency the elements
// run at once (0: DefaultConcurrency).
type ForEach struct {
	Items       string
	Concurrency int
}

// Window is how many elements run at once.
func (f ForEach) Window() int {
	if f.Concurrency <= 0 {
		return DefaultConcurrency
	}
	return min(f.Concurrency, MaxConcurrency)
}

// check rejects a ForEach no scheduler could run.
func (f ForEach) check() error {
	if _, err := condition.CompileList(f.Items); err != nil {
		return fmt.Errorf("the fan-out's list %w", err)
	}
	if f.Concurrency < 0 || f.Concurrency > MaxConcurrency {
		return fmt.Errorf("fan-out concurrency %d: must be 0 to %d", f.Concurrency, MaxConcurrency)
	}
	return nil
}

// Items evaluates the fan-out's list on in: its elements, each compacted
// JSON, in order; or a reason, ErrorForEachItems and why, that fails the
// step for good.
func (f ForEach) Eval(in condition.Input) ([]json.RawMessage, string) {
	l, err := condition.CompileList(f.Items)
	if err == nil {
		var items []json.RawMessage
		if items, err = l.Eval(in, MaxForEach); err == nil {
			return items, ""
		}
	}
	return nil, fmt.Sprintf("%s: the list %q %v", ErrorForEachItems, f.Items, err)
}

// ElementStep is the sort key of the element of index i of step s.
func ElementStep(s, i int) int { return (s+1)*ElementBase + i }

// IsElement reports whether a record's Step is an element's key.
func IsElement(key int) bool { return key >= ElementBase }

// ElementOf is the step and index an element's key names.
func ElementOf(key int) (step, index int) { return key/ElementBase - 1, key % ElementBase }

// StepOf is the step a record's key belongs to: its own for a step, the
// fan-out's for an element.
func StepOf(key int) int {
	if IsElement(key) {
		s, _ := ElementOf(key)
		return s
	}
	return key
}

// ElementKeyRange is the first and last sort key the elements of step s
// may take: what a read of its elements asks for.
func ElementKeyRange(s int) (first, last int) {
	return ElementStep(s, 0), ElementStep(s, MaxForEach-1)
}

// ElementResults is a completed fan-out's result: the list of its
// elements' results, in index order (JSON null for an element that
// returned nothing), and "" when it is within MaxResultBytes; otherwise
// nil and the reason, ErrorResultTooLarge, that fails the step. results[i]
// is element i's recorded result.
func ElementResults(results []json.RawMessage) (json.RawMessage, string) {
	size := 2 + max(len(results)-1, 0) // [ , ]
	for _, r := range results {
		if len(r) == 0 {
			size += len("null")
		}
		size += len(r)
	}
	if size > MaxResultBytes {
		return nil, fmt.Sprintf("%s: the fan-out's %d results take %d bytes, more than %d", ErrorResultTooLarge, len(results), size, MaxResultBytes)
	}
	out := make([]byte, 0, size)
	out = append(out, '[')
	for i, r := range results {
		if i > 0 {
			out = append(out, ',')
		}
		if len(r) == 0 {
			r = json.RawMessage("null")
		}
		out = append(out, r...)
	}
	return append(out, ']'), ""
}

// checkForEach rejects a fan-out no scheduler could run: one on a step no
// agent runs, a list that does not compile, a window out of bounds.
func (s StepDef) checkForEach() error {
	if s.Callback != nil || s.Timer != nil {
		return fmt.Errorf("only a step an agent runs may fan out, not a wait or callback step")
	}
	return s.ForEach.check()
}
