package sim

import (
	"slices"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/sas"
)

// Branches in parallel (issue 27 §2; docs/simulation.md, "Invariants"). In
// a third of the seeds (Config.branching) the workflow is a graph: reserve,
// then charge and hold at once, then ship once both are done. Two rules
// hold the scheduler to it, beside "effect not undone" (every effect, in
// every branch, undone when the order is compensated) and "results seen"
// (a step sees exactly the results of the steps it follows, transitively):
//   - "join passed early": a step is claimed forward only while every step
//     it follows is Processed (or Skipped by its condition), checked at
//     the write that claims it;
//   - "undo before settled": no undo is called while another step of its
//     order is in flight with its deadline still ahead (its outcome not
//     known, nor given up on).

// Planted bugs of these rules (TestChecksCatchPlantedBugs).
const (
	// SabotageEarlyJoin: the store's reads of a graph's order show the
	// steps in flight as Processed, so a completion takes a join for
	// ready while another branch still runs.
	SabotageEarlyJoin = "early-join"
	// SabotageUndoEarly: once a step of a graph's order failed, the
	// store's reads show the steps in flight as Processed (and its undo
	// claims' fence believes them), so the compensation starts while a
	// branch still runs.
	SabotageUndoEarly = "undo-early"
)

// branching reports whether this run's workflow has branches: when the
// configuration says so, for the sabotages of its rules, and in a third
// of the seeds besides (drawn from the seed apart from ForSeed's draws and
// from rejecting's, so that every other choice of a seed stays as it was).
func (c Config) branching() bool {
	if c.Branches || c.Sabotage == SabotageEarlyJoin || c.Sabotage == SabotageUndoEarly {
		return true
	}
	x := uint64(c.Seed)*0xd1b54a32d192ed03 + 0x8bb84b93962eacc9
	x ^= x >> 31
	x *= 0x94d049bb133111eb
	x ^= x >> 29
	return x%3 == 0
}

// tripBranches is the graph a branching run starts with: reserve, then
// charge and hold (a second stock agent call) in parallel, then ship once
// both are done. Every step but ship is undoable.
func tripBranches() sas.Workflow {
	return sas.Workflow{Name: "trip", Steps: []sas.StepDef{
		{Name: "reserve", Agent: "stock", Action: "reserve", Undo: "release", Timeout: stepTimeout},
		{Name: "charge", Agent: "pay", Action: "charge", Undo: "refund", Timeout: stepTimeout, After: []int{0}},
		{Name: "hold", Agent: "stock", Action: "hold", Undo: "unhold", Timeout: stepTimeout, After: []int{0}},
		{Name: "ship", Agent: "stock", Action: "ship", Timeout: stepTimeout, After: []int{1, 2}},
	}}
}

// checkJoin is the rule "join passed early", for a record a write just
// claimed forward (Pending to Processing).
func (w *World) checkJoin(r sas.StepRecord) {
	v, err := w.view(r.OrderID)
	if err != nil {
		return
	}
	for _, p := range v.Preds(r.Step) {
		if p < len(v.Steps) && !sas.Passed(v.Steps[p]) {
			w.violate("join passed early", "order %s step %d (%s) was claimed while step %d (%s), which it follows, is %s",
				r.OrderID, r.Step, r.StepName, p, v.Steps[p].StepName, v.Steps[p].ProcessState)
		}
	}
}

// checkSettledBeforeUndo is the rule "undo before settled", at an undo's
// call.
func (w *World) checkSettledBeforeUndo(req agent.Request) {
	v, err := w.view(req.OrderID)
	if err != nil {
		return
	}
	now := w.clock.Now()
	for _, r := range v.Steps {
		if r.Step != req.StepIndex && r.ProcessState == sas.Processing && now.Before(r.CompleteBy) {
			w.violate("undo before settled", "order %s step %d (%s) was undone while step %d (%s) is in flight until %s",
				req.OrderID, req.StepIndex, req.Step, r.Step, r.StepName, r.CompleteBy.Sub(now))
		}
	}
	for _, e := range w.elementsInFlight(v) { // fanout.go
		w.violate("undo before settled", "order %s step %d (%s) was undone (an element's undo: %v) while element %v is in flight until %s",
			req.OrderID, req.StepIndex, req.Step, isElement(req), e.Key(), e.CompleteBy.Sub(now))
	}
}

// inFlightShownDone is the sabotages' view: a graph's steps in flight
// shown Processed (SabotageUndoEarly: only once a step failed).
func (w *World) inFlightShownDone(v sas.OrderView) sas.OrderView {
	if v.Order.After == nil {
		return v
	}
	switch w.cfg.Sabotage {
	case SabotageEarlyJoin:
	case SabotageUndoEarly:
		if !slices.ContainsFunc(v.Steps, func(r sas.StepRecord) bool { return r.ProcessState == sas.Error }) {
			return v
		}
	default:
		return v
	}
	steps := slices.Clone(v.Steps)
	for i := range steps {
		if steps[i].ProcessState == sas.Processing {
			steps[i].ProcessState = sas.Processed
		}
	}
	v.Steps = steps
	return v
}
