package sim

import (
	"fmt"
	"strings"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/condition"
	"github.com/sas-go/sas/internal/sas"
)

// Choices (issue 27 §3; docs/simulation.md, "Invariants"). In half the
// seeds (Config.choosing) the trip's steps have conditions on the payload
// and on the results so far, drawn from the seed so that across orders and
// seeds some hold, some are false (a first step skipped at submission, a
// middle one, the last ones, every one after a step) and some cannot be
// evaluated (a field that is not there). Two rules hold the system to them:
//   - "skipped called": no step is called whose condition is false on what
//     it sees (or that its record says was skipped), checked at the call;
//   - "condition misjudged": once settled, a Skipped step's condition is
//     false on the results recorded before it, and a step failed by its
//     condition cannot be evaluated on them (a step whose condition held
//     is not skipped).

// SabotageRunSkipped is the planted bug of these rules: the store runs the
// first step a completion would skip (it claims it instead of the next),
// as a scheduler that ignored conditions would.
const SabotageRunSkipped = "run-skipped"

// choosing reports whether this run's workflow has conditions: when the
// configuration says so, in the seeds of its planted bug, and in half the
// seeds besides (drawn from the seed apart from ForSeed's draws).
func (c Config) choosing() bool {
	if c.Choices || c.Sabotage == SabotageRunSkipped {
		return true
	}
	return splitmix(uint64(c.Seed)^0x5bd1e995)%2 == 0
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// withChoices gives the trip's steps their conditions for the seed: the
// orders' amounts are 11, 12, 13… (World.submit), so each condition picks
// some of them.
func withChoices(w sas.Workflow, seed int64) sas.Workflow {
	x := splitmix(uint64(seed))
	steps := append([]sas.StepDef(nil), w.Steps...)
	// The first step: skipped at submission for one amount in eight.
	steps[0].When = fmt.Sprintf("payload.amount != %d", 11+x%8)
	// The second: false for a third of the amounts; for a fifth of the
	// others it reads a field no payload has (a failure at run time).
	steps[1].When = fmt.Sprintf("payload.amount %% 3 != %d && (payload.amount %% 5 != %d || payload.voucher)", x%3, (x>>8)%5)
	// The third: whenever the second ran (it returns a result), else for
	// half the amounts.
	steps[2].When = fmt.Sprintf("has(results.%s) || payload.amount %% 2 == %d", steps[1].Name, (x>>16)%2)
	return sas.Workflow{Name: w.Name, Steps: steps}
}

// branchChoices gives the graph's steps that follow another their
// conditions for the seed (a step that starts with the order takes none:
// docs/workflows.md, "Choices in branches"): charge false for a third of
// the amounts and failing at run time for a fifth of the others, hold
// false for a quarter, ship whenever charge ran, else for half the
// amounts. A skipped branch counts as settled for the join.
func branchChoices(w sas.Workflow, seed int64) sas.Workflow {
	x := splitmix(uint64(seed) ^ 0x27)
	steps := append([]sas.StepDef(nil), w.Steps...)
	steps[1].When = fmt.Sprintf("payload.amount %% 3 != %d && (payload.amount %% 5 != %d || payload.voucher)", x%3, (x>>8)%5)
	steps[2].When = fmt.Sprintf("payload.amount %% 4 != %d", (x>>12)%4)
	steps[3].When = fmt.Sprintf("has(results.%s) || payload.amount %% 2 == %d", steps[1].Name, (x>>16)%2)
	return sas.Workflow{Name: w.Name, Steps: steps}
}

// checkCalledCondition is "skipped called", at the call: a step's do is
// called only when its condition holds on what the request carries.
func (w *World) checkCalledCondition(req agent.Request) {
	if req.Undo {
		return
	}
	o, err := w.view(req.OrderID)
	if err != nil {
		return // "unknown order" says so
	}
	if req.StepIndex < len(o.Steps) && o.Steps[req.StepIndex].ProcessState == sas.Skipped {
		w.violate("skipped called", "order %s step %d (%s) was called, and its record says it was skipped", req.OrderID, req.StepIndex, req.Step)
		return
	}
	def, ok := w.defs[o.Order.Version]
	if !ok || req.StepIndex >= len(def.Steps) || def.Steps[req.StepIndex].When == "" {
		return // "wrong definition" says so, or nothing to hold
	}
	if req.StepIndex < len(o.Steps) && overridden(o.Steps[req.StepIndex]) {
		return // an operator resubmitted it after its condition failed: their word runs it
	}
	holds, err := judge(o, def, req.StepIndex, req.Results)
	if !holds {
		w.violate("skipped called", "order %s step %d (%s) was called though its condition %s is %s on the results it carries (%s)",
			req.OrderID, req.StepIndex, req.Step, def.Steps[req.StepIndex].When, verdict(holds, err), showResults(req.Results))
	}
}

// checkConditions is "condition misjudged", once settled: each step the
// order passed over had a condition that was false (Skipped) or could not
// be evaluated (Error by its condition) on the results before it.
func (w *World) checkConditions(v sas.OrderView) {
	def, ok := w.defs[v.Order.Version]
	if !ok {
		return
	}
	for i, r := range v.Steps {
		byCondition := r.ProcessState == sas.Error && r.FailedBy == sas.ByCondition
		if (r.ProcessState != sas.Skipped && !byCondition) || i >= len(def.Steps) {
			continue
		}
		if def.Steps[i].When == "" {
			w.violate("condition misjudged", "order %s step %d (%s) is %s but has no condition", v.Order.OrderID, i, r.StepName, r.ProcessState)
			continue
		}
		seen := v.ResultsFor(i, false) // the steps before it; in a graph, those it follows
		holds, err := judge(v, def, i, seen)
		if (r.ProcessState == sas.Skipped && (holds || err != nil)) || (byCondition && err == nil) {
			w.violate("condition misjudged", "order %s step %d (%s) is %s, but its condition %s is %s on the results before it (%s)",
				v.Order.OrderID, i, r.StepName, r.ProcessState, def.Steps[i].When, verdict(holds, err), showResults(seen))
		}
	}
}

// overridden reports whether an operator resubmitted the step after its
// condition could not be evaluated (docs/workflows.md, "Choices": the
// resubmit runs it).
func overridden(r sas.StepRecord) bool {
	failed := false
	for _, h := range r.History {
		failed = failed || (h.To == sas.Error && strings.HasPrefix(h.Reason, sas.ErrorCondition))
		if failed && h.From == sas.Error && h.To == sas.Pending {
			return true
		}
	}
	return false
}

// judge evaluates step i's condition of order v's definition on results.
func judge(v sas.OrderView, def sas.Workflow, i int, results sas.Results) (bool, error) {
	c, err := condition.Compile(def.Steps[i].When)
	if err != nil {
		return false, err
	}
	return c.Eval(condition.Input{Payload: v.Order.Payload, Results: results, OrderID: v.Order.OrderID, Workflow: v.Order.Workflow})
}

func verdict(holds bool, err error) string {
	switch {
	case err != nil:
		return "not evaluable (" + err.Error() + ")"
	case holds:
		return "true"
	}
	return "false"
}

// runSkipped is SabotageRunSkipped: a completion that would skip steps
// (none failed) claims the first of them instead.
func runSkipped(p sas.CompleteParams) sas.CompleteParams {
	if len(p.Skip) == 0 || p.Skip[len(p.Skip)-1].Failed {
		return p
	}
	next := sas.ClaimParams{Owner: p.Owner, Now: p.Now, CompleteBy: p.Now.Add(stepTimeout)}
	if p.Next != nil {
		next = *p.Next
		if p.Graph {
			p.More = append(p.More, next) // a graph's claims all stay
		}
	}
	next.Key, next.From, next.Attempt = sas.StepKey{OrderID: p.Key.OrderID, Step: p.Skip[0].Step}, sas.Pending, 0
	p.Next, p.Skip = &next, nil
	return p
}
