package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/sas-go/sas/internal/condition"
	"github.com/sas-go/sas/internal/metrics"
	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
)

// Choices (docs/workflows.md, "Choices"). A step with a condition
// (StepDef.When) runs only when it holds, evaluated when the step before it
// completes (at submission for the first steps), from the order's payload
// and the results recorded so far. The completion's write claims the next
// step to run and settles the ones passed over (sas.Skip): Skipped, or in
// Error for one whose condition could not be evaluated, which then fails
// the order as any permanent failure does. A workflow without conditions
// decides nothing here and reads nothing more.

// choice is what a completion (or a submission) decides about the steps
// after it.
type choice struct {
	next  int        // the step to claim; -1 when none is left to run
	skips []sas.Skip // the steps passed over, in order; a failed one last
}

// failed is the step whose condition could not be evaluated, if any.
func (c choice) failed() (sas.Skip, bool) {
	if n := len(c.skips); n > 0 && c.skips[n-1].Failed {
		return c.skips[n-1], true
	}
	return sas.Skip{}, false
}

// nextToRun decides which step runs after the steps before from have run
// or been skipped: the first from from on whose condition holds (or that
// has none). The steps before it whose conditions are false are skipped; a
// condition that cannot be evaluated stops the search there (that step
// fails and nothing after it runs). results are the results recorded for
// the steps before from. It is the one place that evaluates conditions:
// a scheduler that finds several successors asks it for each.
func nextToRun(o order, from int, results sas.Results) choice {
	c := choice{next: -1}
	for i := from; i < o.n(); i++ {
		run, k := judge(o, i, results)
		if run {
			c.next = i
			return c
		}
		c.skips = append(c.skips, k)
		if k.Failed {
			return c
		}
	}
	return c
}

// judge decides whether step i runs, given the results its condition sees:
// it runs (no condition, or one that holds), or k says how it is passed
// over (Skipped, or Failed when its condition could not be evaluated).
// nextToRun asks it along a straight line, planInGraph for each step a
// completion makes ready in a graph.
func judge(o order, i int, results sas.Results) (run bool, k sas.Skip) {
	def := o.wf.Steps[i]
	if def.When == "" {
		return true, sas.Skip{}
	}
	holds, why := evaluate(o, def, results)
	switch {
	case why != "":
		return false, sas.Skip{Step: i, Failed: true, Reason: why}
	case holds:
		return true, sas.Skip{}
	}
	return false, sas.Skip{Step: i, Reason: sas.BoundReason(fmt.Sprintf("skipped: its condition %s is false", def.When))}
}

// evaluate is the step's condition on the order: whether it holds, or why
// it could not be evaluated ("" when it could).
func evaluate(o order, def sas.StepDef, results sas.Results) (bool, string) {
	cond, err := condition.Compile(def.When) // cached; checked when the definition loaded
	if err == nil {
		var holds bool
		if holds, err = cond.Eval(condition.Input{Payload: o.ord.Payload, Results: results, OrderID: o.id(), Workflow: o.ord.Workflow}); err == nil {
			return holds, ""
		}
	}
	return false, sas.BoundReason(fmt.Sprintf("%s: step %s's condition %s could not be evaluated: %v", sas.ErrorCondition, def.Name, def.When, err))
}

// decideAfter is what the completion of step done (its result res, not
// yet recorded) decides. Only a successor with a condition needs the
// results, so only then is the order read (once, when not read already).
func (s *Service) decideAfter(ctx context.Context, o *order, done int, res []byte) (choice, error) {
	if done+1 >= o.n() {
		return choice{next: -1}, nil
	}
	if o.wf.Steps[done+1].When == "" {
		return choice{next: done + 1}, nil
	}
	if o.steps == nil {
		if err := s.read(ctx, o); err != nil {
			return choice{}, fmt.Errorf("reading order %s for the conditions after step %d: %w", o.id(), done, err)
		}
	}
	results := sas.ResultsBefore(o.steps, done)
	if len(res) > 0 {
		if results == nil {
			results = sas.Results{}
		}
		results[o.wf.Steps[done].Name] = res
	}
	return nextToRun(*o, done+1, results), nil
}

// ranAfter is the first step after done that is not Skipped, as the
// records read say (the one a completion claimed or failed): -1 when every
// step after done was skipped (or there is none).
func ranAfter(o order, done int) int {
	for i := done + 1; i < o.n(); i++ {
		if o.wf.Steps[i].When == "" {
			return i // never skipped
		}
		if r, ok := o.step(i); !ok || r.ProcessState != sas.Skipped {
			return i
		}
	}
	return -1
}

// submittedPast makes the effects of a submission whose first steps the
// conditions passed over (c): the request of the step claimed; or the
// failure of the one whose condition could not be evaluated; or, when
// every step was skipped, the order's end (processed, with no results).
func (s *Service) submittedPast(ctx context.Context, u *outbox.Unit, o order, c choice, now time.Time) error {
	if c.next >= 0 {
		r, ok := o.step(c.next)
		if !ok {
			return fmt.Errorf("submitting order %s: the store returned no step %d", o.id(), c.next)
		}
		s.dispatch(ctx, u, o, o.wf.Steps[c.next], r)
		return nil
	}
	if k, ok := c.failed(); ok {
		r, ok := o.step(k.Step)
		if !ok {
			return fmt.Errorf("submitting order %s: the store returned no step %d", o.id(), k.Step)
		}
		return s.conditionFailed(ctx, u, o, r, now)
	}
	s.log.InfoContext(ctx, "order processed: every step skipped", "order", o.id())
	s.emitOrder(ctx, metrics.OrdersProcessed, o.id(), o.ord.Workflow, now)
	s.post(ctx, u, o.ord, sas.Status{Status: sas.StatusProcessed, Sequence: SeqProcessed(o.n())}, now)
	return nil
}

// postSkipped tells the submitter of each step the order passed over
// because its condition was false (a failed one is told as a failure).
func (s *Service) postSkipped(ctx context.Context, u *outbox.Unit, o order, skips []sas.Skip, now time.Time) {
	for _, k := range skips {
		if !k.Failed {
			s.post(ctx, u, o.ord, sas.Status{Status: sas.StatusStepSkipped, Step: o.wf.Steps[k.Step].Name, Sequence: SeqStepSkipped(k.Step), Reason: k.Reason}, now)
		}
	}
}

// skippedAfter are the steps after done that the order's records show
// Skipped, up to the next that is not: what the completion of done
// skipped, as a redelivery of its reply finds it.
func skippedAfter(o order, done int) []sas.Skip {
	var out []sas.Skip
	for i := done + 1; i < o.n(); i++ {
		r, ok := o.step(i)
		if !ok || r.ProcessState != sas.Skipped {
			break
		}
		out = append(out, sas.Skip{Step: i, Reason: r.LastHistoryReason()})
	}
	return out
}

// conditionFailed makes the effects of step r's failure by its condition
// (written with a completion or a submission; r's order read in o): the
// alert and the failed status, then the order's compensation. They are
// delivered before the compensation claims any undo: that claim makes the
// reply that completed the step before r stale, so a redelivery of it
// would not tell them again (as tellBeforeClaim does for a failed step's
// own undo). A failure to deliver fails the message, whose redelivery
// finds the step failed and tells it again under the same alert id.
func (s *Service) conditionFailed(ctx context.Context, u *outbox.Unit, o order, r sas.StepRecord, now time.Time) error {
	s.log.WarnContext(ctx, "step failed: its condition could not be evaluated", "order", o.id(), "step", r.Step, "reason", r.LastError)
	s.emitStep(ctx, o, r.Step, false, now, metrics.StepsFailed)
	// An undo's claim tells first (claimUndo); with no claim, told here.
	claimed, err := s.startCompensation(ctx, u, o, false, now)
	if err != nil || claimed != (sas.StepKey{}) {
		return err
	}
	return s.tellConditionFailures(ctx, o, now)
}

// resubmitted repeats, for a redelivered intake, what the submission of an
// order decided about its first steps (submittedPast): the skipped
// statuses, and the failure of a step by its condition or the order's end
// when the submission left no step to run. The first delivery may have
// stopped after its write; the effects are idempotent (one alert id, one
// status sequence each).
func (s *Service) resubmitted(ctx context.Context, u *outbox.Unit, o order, now time.Time) error {
	if o.n() == 0 || o.wf.Steps[0].When == "" {
		return nil
	}
	skips := skippedAfter(o, -1)
	s.postSkipped(ctx, u, o, skips, now)
	if len(skips) == o.n() {
		return s.submittedPast(ctx, u, o, choice{next: -1, skips: skips}, now)
	}
	if r, ok := o.step(len(skips)); ok && r.ProcessState == sas.Error && r.FailedBy == sas.ByCondition && r.Attempt == 0 {
		return s.conditionFailed(ctx, u, o, r, now)
	}
	return nil
}

// tellConditionFailures delivers, before a compensation claims an undo, the
// alert and failed status of every step of o failed by its condition: such
// a step is never undone itself (nothing to undo), so no claim of its own
// tells for it (tellBeforeClaim), and the claim of another step's undo
// makes the reply whose completion failed it stale (the sweep's seed 449:
// an operator's compensate raced a failed alert).
func (s *Service) tellConditionFailures(ctx context.Context, o order, now time.Time) error {
	for _, r := range o.steps {
		if r.ProcessState != sas.Error || r.FailedBy != sas.ByCondition {
			continue
		}
		if err := s.cfg.Alerter.Alert(ctx, alertFor(o, r, sas.AlertID(r.Key(), r.ProcessState, r.Attempt), r.LastError, r.UpdatedAt)); err != nil {
			return fmt.Errorf("alerting about step %s, failed by its condition, before compensating: %w", r.Key(), err)
		}
		st := sas.Status{Status: sas.StatusFailed, Step: o.wf.Steps[r.Step].Name, Sequence: SeqFailed(r.Step, r.Attempt), Reason: r.LastError}
		if err := s.postNow(ctx, o.ord, st, now); err != nil {
			return err
		}
	}
	return nil
}
