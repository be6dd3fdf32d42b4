package sas

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Branches in parallel (docs/workflows.md, "Branches in parallel"). A step
// names the steps it follows (StepDef.After); by default the one before it,
// so that a workflow without After is the straight line it always was and
// keeps its version. A step starts once every step it follows is
// Processed; the first step starts with the order. When a step fails for
// good nothing new starts, the steps in flight in other branches settle,
// and then every step that took effect, or may have, is undone, newest
// completion first.

// Limits on a graph, checked when a definition loads.
const (
	// MaxJoin bounds the steps one step may follow (branches per join).
	MaxJoin = 10
	// MaxFork bounds the steps that may follow one step (branches per fork).
	MaxFork = 10
)

// Graph reports whether w has branches: a step follows other steps than
// the one before it. A workflow that is not a graph runs as it always did.
func (w Workflow) Graph() bool {
	for _, s := range w.Steps {
		if s.After != nil {
			return true
		}
	}
	return false
}

// Roots are the steps that start with the order besides the first: those
// that follow no step.
func (w Workflow) Roots() []int {
	var out []int
	for i := 1; i < len(w.Steps); i++ {
		if w.Steps[i].After != nil && len(w.Steps[i].After) == 0 {
			out = append(out, i)
		}
	}
	return out
}

// Preds are the steps step i follows, by index.
func (w Workflow) Preds(i int) []int { return predsOf(w.Steps[i].After, i) }

func predsOf(after []int, i int) []int {
	switch {
	case after != nil:
		return after
	case i == 0:
		return nil
	}
	return []int{i - 1}
}

// After is the graph of w, each step's predecessors, as an order records
// it (Order.After): nil for a workflow that is not a graph.
func (w Workflow) After() [][]int {
	if !w.Graph() {
		return nil
	}
	out := make([][]int, len(w.Steps))
	for i := range w.Steps {
		out[i] = append([]int{}, w.Preds(i)...)
	}
	return out
}

// Succs are the steps that follow step i, by index.
func (w Workflow) Succs(i int) []int {
	var out []int
	for j := range w.Steps {
		if slices.Contains(w.Preds(j), i) {
			out = append(out, j)
		}
	}
	return out
}

// Ancestors are the steps step i follows, directly or through others:
// those whose results its request carries.
func (w Workflow) Ancestors(i int) []int { return ancestors(w.Preds, i) }

func ancestors(preds func(int) []int, i int) []int {
	seen := map[int]bool{}
	var walk func(int)
	walk = func(j int) {
		for _, p := range preds(j) {
			if !seen[p] {
				seen[p] = true
				walk(p)
			}
		}
	}
	walk(i)
	out := make([]int, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

// checkGraph refuses a graph no order could run: a predecessor that is no
// step, the step itself, one named twice, a first step that follows
// anything, a later step that follows nothing, a cycle, or a join or fork
// over its limit. One reason, one line.
func (w Workflow) checkGraph() error {
	bad := func(format string, args ...any) error {
		return &ValidationError{Field: "workflow", Reason: w.Name + ": " + fmt.Sprintf(format, args...)}
	}
	n := len(w.Steps)
	forks := make([]int, n)
	for i, s := range w.Steps {
		if s.After == nil {
			if i > 0 {
				forks[i-1]++
			}
			continue
		}
		if i == 0 && len(s.After) > 0 {
			return bad("step %s: the first step starts with the order and follows no step", s.Name)
		}
		if len(s.After) > MaxJoin {
			return bad("step %s follows %d steps, at most %d", s.Name, len(s.After), MaxJoin)
		}
		seen := map[int]bool{}
		for _, p := range s.After {
			switch {
			case p < 0 || p >= n:
				return bad("step %s follows step %d, which does not exist", s.Name, p)
			case p == i:
				return bad("step %s follows itself", s.Name)
			case seen[p]:
				return bad("step %s follows %s twice", s.Name, w.Steps[p].Name)
			}
			seen[p] = true
			forks[p]++
		}
	}
	for i, f := range forks {
		if f > MaxFork {
			return bad("%d steps follow step %s, at most %d", f, w.Steps[i].Name, MaxFork)
		}
	}
	if w.Graph() {
		for i, s := range w.Steps {
			if s.When != "" && len(w.Preds(i)) == 0 {
				return bad("step %s starts with the order in a workflow with branches: it takes no condition", s.Name)
			}
		}
	}
	if c := w.cycle(); c != nil {
		names := make([]string, len(c))
		for k, i := range c {
			names[k] = w.Steps[i].Name
		}
		return bad("the steps follow each other in a cycle: %s", strings.Join(names, " → "))
	}
	return nil
}

// cycle returns a cycle of the graph (its first step repeated at the end),
// or nil.
func (w Workflow) cycle() []int {
	preds := make([][]int, len(w.Steps))
	for i := range w.Steps {
		preds[i] = w.Preds(i)
	}
	return Cycle(preds)
}

// Cycle returns a cycle of the graph whose step i follows preds[i], in the
// order its steps would run with the first repeated at the end, or nil.
// The workflow package's validation and the registry's share it.
func Cycle(preds [][]int) []int {
	const (
		unseen = iota
		open
		done
	)
	mark := make([]int, len(preds))
	var path []int
	var visit func(int) []int
	visit = func(i int) []int {
		mark[i] = open
		path = append(path, i)
		for _, p := range preds[i] {
			switch mark[p] {
			case open:
				c := append(slices.Clone(path[slices.Index(path, p):]), p)
				slices.Reverse(c) // in the order the steps run
				return c
			case unseen:
				if c := visit(p); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		mark[i] = done
		return nil
	}
	for i := range preds {
		if mark[i] == unseen {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}

// Passed reports whether a step counts as settled for the steps that
// follow it: Processed, or Skipped by its condition (a skipped step
// contributes no result; docs/workflows.md, "Choices in branches").
func Passed(r StepRecord) bool {
	return r.ProcessState == Processed || r.ProcessState == Skipped
}

// Ready lists the steps of an order that may start, from its records as
// a completer sees them (the completed step counted Processed): each
// follows at least one step, every step it follows is Passed, and it was
// never claimed (Pending at attempt 0). Not only the completed step's
// successors: a step made ready while the order was failing (nothing
// starts then) starts with the next completion once an operator's
// resubmit has let the order run on.
func Ready(w Workflow, steps []StepRecord) []int {
	state := map[int]StepRecord{}
	for _, r := range steps {
		state[r.Step] = r
	}
	var out []int
	for j := range w.Steps {
		r, ok := state[j]
		preds := w.Preds(j)
		if !ok || len(preds) == 0 || r.ProcessState != Pending || r.Attempt != 0 {
			continue
		}
		ready := true
		for _, p := range preds {
			if pr, ok := state[p]; !ok || !Passed(pr) {
				ready = false
			}
		}
		if ready {
			out = append(out, j)
		}
	}
	return out
}

// CompletedAt is when a step last reached Processed or Error (its last
// such history entry), else when it was last written: the time undos are
// ordered by, newest first.
func CompletedAt(r StepRecord) time.Time {
	for i := len(r.History) - 1; i >= 0; i-- {
		if h := r.History[i]; h.To == Processed || h.To == Error {
			return h.At
		}
	}
	return r.UpdatedAt
}

// NewestFirst orders records by CompletedAt, newest first; a tie goes to
// the higher step number, as in a straight line.
func NewestFirst(rs []StepRecord) {
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := CompletedAt(rs[i]), CompletedAt(rs[j])
		if !a.Equal(b) {
			return a.After(b)
		}
		return rs[i].Step > rs[j].Step
	})
}

// ResultsOf collects the results recorded on the given steps, by name:
// what a request of a step in a graph carries (its ancestors', and for an
// undo its own step's too).
func ResultsOf(steps []StepRecord, which []int) Results {
	var out Results
	for _, r := range steps {
		if len(r.Result) == 0 || !slices.Contains(which, r.Step) {
			continue
		}
		if out == nil {
			out = Results{}
		}
		out[r.StepName] = r.Result
	}
	return out
}

// preds is step i's predecessors as the order recorded its graph.
func (v OrderView) preds(i int) []int {
	if v.Order.After != nil && i < len(v.Order.After) {
		return v.Order.After[i]
	}
	if i == 0 {
		return nil
	}
	return []int{i - 1}
}

// Preds are the steps step i of the order follows (Order.After; the step
// before it in an order that is not a graph).
func (v OrderView) Preds(i int) []int { return v.preds(i) }

// Follows names the steps step i of the order follows (what sasctl show
// and the console list beside it).
func (v OrderView) Follows(i int) []string {
	var out []string
	for _, p := range v.preds(i) {
		for _, r := range v.Steps {
			if r.Step == p {
				out = append(out, r.StepName)
			}
		}
	}
	return out
}

// ResultsFor is what the request of step (its undo with undo) carries in
// this order: the results of the steps it follows, directly or not, and an
// undo its own step's too.
func (v OrderView) ResultsFor(step int, undo bool) Results {
	if v.Order.After == nil {
		end := step
		if undo {
			end++
		}
		return ResultsBefore(v.Steps, end)
	}
	which := ancestors(v.preds, step)
	if undo {
		which = append(which, step)
	}
	return ResultsOf(v.Steps, which)
}

// graphSettled is Settled's word on a graph's waiting steps: a Pending
// step whose every predecessor is Processed is about to be claimed, unless
// a step failed (then nothing new starts).
func (v OrderView) graphSettled() bool {
	for _, r := range v.Steps {
		switch r.ProcessState {
		case Error, Compensating, Compensated, CompensationFailed:
			return true
		}
	}
	for _, r := range v.Steps {
		if v.claimDue(r) {
			return false
		}
	}
	return true
}

// owedInGraph reports whether a Processed step of a graph order is still
// owed its undo: undos run newest completion first (NewestFirst), so one
// that completed before the oldest undone step has not been reached yet,
// while one after it has no Undo and stays Processed for good.
func (v OrderView) owedInGraph() bool {
	recs := slices.Clone(v.Steps)
	NewestFirst(recs)
	last := -1
	for i, r := range recs {
		if r.ProcessState == Compensated {
			last = i
		}
	}
	if last < 0 {
		return false
	}
	for _, r := range recs[last+1:] {
		if r.ProcessState == Processed {
			return true
		}
	}
	return false
}

// claimDue reports whether a Pending step of a graph order is about to be
// claimed: every step it follows is Passed (a step that follows none
// is ready from the start, DueAt set, which Settled reads already).
func (v OrderView) claimDue(r StepRecord) bool {
	if r.ProcessState != Pending || len(v.preds(r.Step)) == 0 {
		return false
	}
	for _, p := range v.preds(r.Step) {
		ok := false
		for _, q := range v.Steps {
			if q.Step == p && Passed(q) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
