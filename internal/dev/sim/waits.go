package sim

import (
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// Wait steps (issue 28 §2; docs/simulation.md, "Invariants"). In a third
// of the seeds (Config.waiting) the trip waits between its charge and its
// shipment: for a duration drawn from the seed, some within SQS's 15-minute
// delay (the scheduler's own delayed retry ends them, racing the sweep's),
// some past it (only the sweep does). One rule holds them:
//   - "timer fired early": a wait step's move to Processed is never made
//     before its claim plus its duration, whoever asked and however the
//     messages were duplicated, delayed or lost.

//   - "started early": in the same seeds every second order is submitted
//     to start later (its intake's startAt), some within SQS's delay (the
//     scheduler's own delayed retry starts it), some past it (the sweep
//     does); no step of it is claimed before its start time.

// SabotageStartEarly is the planted bug of "started early": the store
// writes an order that starts later with a tenth of its delay as its first
// step's pick-up deadline (a scheduler that read the start time in the
// wrong unit), so the sweep starts it early.
const SabotageStartEarly = "start-early"

// startDelays are the delays a later order draws from.
var startDelays = []time.Duration{30 * time.Second, 4 * time.Minute, 16 * time.Minute}

// startLater is when the order submitted as the n-th starts, if later:
// every second order of a waiting run.
func (w *World) startLater(n int) (time.Time, bool) {
	if !w.cfg.waiting() || n%2 == 1 {
		return time.Time{}, false
	}
	d := startDelays[splitmix(uint64(w.cfg.Seed)^uint64(n)*0x51ed)%uint64(len(startDelays))]
	return w.clock.Now().Add(d), true
}

// checkStart is "started early", at a write that claimed a forward step
// (b to a) for the first time. A step claimed before (b's attempt above
// 0) was resubmitted by an operator (a step failed by its condition at
// submission: seeds 3584, 4834, 4996), whose word starts the order: its
// claims are not judged from then on.
func (w *World) checkStart(name string, b, a sas.StepRecord) {
	at, ok := w.startAt[a.OrderID]
	if !ok || b.ProcessState != sas.Pending || a.ProcessState != sas.Processing {
		return
	}
	if b.Attempt != 0 {
		delete(w.startAt, a.OrderID)
		return
	}
	now := w.clock.Now()
	if now.Before(at) {
		w.violate("started early", "%s claimed %v of an order that starts at %s, at %s", name, a.Key(), at.Sub(start), now.Sub(start))
		return
	}
	w.tracef("  step %v started %s after its order's start time", a.Key(), now.Sub(at))
}

// earlyStart is SabotageStartEarly on a submission.
func (s *store) earlyStart(p *sas.SubmitParams) {
	if s.w.cfg.Sabotage == SabotageStartEarly && p.Claim == nil && p.PickupBy.After(p.Now) {
		p.PickupBy = p.Now.Add(p.PickupBy.Sub(p.Now) / 10)
	}
}

// SabotageTimerEarly is the planted bug of that rule: the store writes a
// wait step's claim with a tenth of its wait as the lease (a scheduler that
// read the duration in the wrong unit), so the sweep finds it due, and the
// write that ends it, fenced on that lease, lets it end early.
const SabotageTimerEarly = "timer-early"

// waitDurations are the waits a seed draws from.
var waitDurations = []time.Duration{20 * time.Second, 90 * time.Second, 5 * time.Minute, 16 * time.Minute}

// waiting reports whether this run's trip has a wait step.
func (c Config) waiting() bool {
	if c.Waits || c.Sabotage == SabotageTimerEarly || c.Sabotage == SabotageStartEarly {
		return true
	}
	return splitmix(uint64(c.Seed)^0x2545f491)%3 == 0
}

// withWait puts a wait step after the trip's second step (charge). In a
// graph (branches.go) it goes in charge's branch: the steps that followed
// charge follow the wait instead, so the join waits for it while hold runs
// in the other branch.
func withWait(w sas.Workflow, seed int64) sas.Workflow {
	d := waitDurations[splitmix(uint64(seed)^0x9e37)%uint64(len(waitDurations))]
	const at = 2 // the wait's index; steps from it on move one up
	wait := sas.StepDef{Name: "cool-off", Timer: &sas.Timer{For: d}}
	if w.Graph() {
		wait.After = []int{at - 1}
	}
	steps := append([]sas.StepDef(nil), w.Steps[:at]...)
	steps = append(steps, wait)
	steps = append(steps, w.Steps[at:]...)
	for i := range steps {
		if i == at || steps[i].After == nil {
			continue
		}
		after := make([]int, len(steps[i].After))
		for j, p := range steps[i].After {
			switch {
			case p == at-1:
				after[j] = at // what followed charge follows the wait
			case p >= at:
				after[j] = p + 1
			default:
				after[j] = p
			}
		}
		steps[i].After = after
	}
	return sas.Workflow{Name: w.Name, Steps: steps}
}

// stepDef is the definition of k's step in the version its order runs on.
func (w *World) stepDef(k sas.StepKey) (sas.StepDef, bool) {
	v, err := w.view(k.OrderID)
	if err != nil {
		return sas.StepDef{}, false
	}
	def, ok := w.defs[v.Order.Version]
	if !ok || k.Step >= len(def.Steps) {
		return sas.StepDef{}, false
	}
	return def.Steps[k.Step], true
}

// checkTimer is "timer fired early", at the write that moved a wait step
// from b to Processed (a).
func (w *World) checkTimer(name string, b, a sas.StepRecord) {
	if a.ProcessState != sas.Processed || b.ProcessState != sas.Processing {
		return
	}
	def, ok := w.stepDef(a.Key())
	if !ok || def.Timer == nil || def.Timer.For == 0 {
		return
	}
	claimed := b.ClaimedAt()
	due := claimed.Add(def.Timer.For)
	if w.clock.Now().Before(due) {
		w.violate("timer fired early", "%s ended wait step %v (attempt %d, claimed %s, %s) at %s, %s before its due time",
			name, a.Key(), b.Attempt, claimed.Sub(start), def.Timer.For, w.clock.Now().Sub(start), due.Sub(w.clock.Now()))
		return
	}
	w.tracef("  wait step %v of %s ended %s after its due time", a.Key(), def.Timer.For, w.clock.Now().Sub(due))
}

// earlyTimer is SabotageTimerEarly on a claim of k.
func (s *store) earlyTimer(k sas.StepKey, p *sas.ClaimParams, now time.Time) {
	if s.w.cfg.Sabotage != SabotageTimerEarly || p == nil {
		return
	}
	if def, ok := s.w.stepDef(k); ok && def.Timer != nil {
		p.CompleteBy = now.Add(p.CompleteBy.Sub(now) / 10)
	}
}

// agentless reports whether k's step has no agent (a wait step): its
// claim owes no request.
func (w *World) agentless(k sas.StepKey) bool {
	def, ok := w.stepDef(k)
	return ok && def.Agentless()
}
