package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sas-go/sas/internal/sas"
)

// A schedule's run is an intake naming the schedule and the time it was
// scheduled for (docs/schedules.md). Its order id is a function of the two,
// so every copy of one trigger is one order, which the submission makes
// once. The overlap policy "skip" is decided here and fenced in the store:
// the run is submitted on the condition that the schedule's running order is
// still the one read (sas.RunClaim), so two triggers racing past a settled
// run cannot both start.

// maxRunDecisions bounds how often one intake decides again after losing
// the schedule's race; each loss means another run started meanwhile, so
// the next decision is a skip, and a third is never needed.
const maxRunDecisions = 3

// runDecision is what an intake does about its schedule.
type runDecision struct {
	claim *sas.RunClaim // nil: not a run, or a run whose order exists
	skip  string        // why the run is skipped; "" runs it
}

// decideRun checks an intake's schedule fields against the deployment's
// schedules and, for a skip schedule, reads whether the previous run has
// settled. A *sas.ValidationError is a rejection.
func (s *Service) decideRun(ctx context.Context, in sas.Intake, submitter string) (runDecision, error) {
	if in.Schedule == "" {
		if name, ok := sas.RunOf(in.OrderID, s.knownSchedule); ok {
			return runDecision{}, &sas.ValidationError{Field: "orderId",
				Reason: fmt.Sprintf("%s is the id of a run of schedule %s, which only its trigger starts", in.OrderID, name)}
		}
		return runDecision{}, nil
	}
	cfg, ok := s.cfg.Schedules[in.Schedule]
	if !ok {
		return runDecision{}, &sas.ValidationError{Field: "schedule", Reason: fmt.Sprintf("%q is not a schedule of this deployment", in.Schedule)}
	}
	if len(cfg.Senders) > 0 && submitter != "" && !slices.Contains(cfg.Senders, submitter) {
		return runDecision{}, &sas.ValidationError{Field: "schedule",
			Reason: fmt.Sprintf("%s may not start runs of schedule %s (only its own role may)", submitter, in.Schedule)}
	}
	at, err := sas.ParseScheduledAt(in.ScheduledAt) // checked by ParseIntake
	if err != nil {
		return runDecision{}, &sas.ValidationError{Field: "scheduledAt", Reason: err.Error()}
	}
	claim := &sas.RunClaim{Schedule: in.Schedule, ScheduledAt: at}
	if cfg.Overlap != sas.OverlapSkip {
		return runDecision{claim: claim}, nil
	}
	// A copy of a run that started is that run: the submission's duplicate
	// path answers it, and the schedule is left as it is.
	switch _, err := s.cfg.Store.GetOrder(ctx, in.OrderID); {
	case err == nil:
		return runDecision{}, nil
	case !errors.Is(err, sas.ErrNotFound):
		return runDecision{}, fmt.Errorf("reading run %s of schedule %s: %w", in.OrderID, in.Schedule, err)
	}
	st, err := s.cfg.Store.GetSchedule(ctx, in.Schedule)
	if err != nil && !errors.Is(err, sas.ErrNotFound) {
		return runDecision{}, fmt.Errorf("reading schedule %s: %w", in.Schedule, err)
	}
	switch {
	case st.Running == in.OrderID:
		// This run started between the read above and this one (another
		// copy of its trigger submitted it): this copy is that run, not a
		// run over it, so the submission's duplicate path answers it
		// (simulator seed 4168: skipped as "in flight", the copy left the
		// run's request unsent behind a first copy that died).
		return runDecision{}, nil
	case st.LastSkipped == in.OrderID:
		return runDecision{skip: "it was skipped already"}, nil
	case !st.LastRunAt.IsZero() && at.Before(st.LastRunAt):
		return runDecision{skip: fmt.Sprintf("a later run, %s, has started", st.Running)}, nil
	}
	if st.Running != "" {
		v, err := s.cfg.Store.GetOrder(ctx, st.Running)
		if err != nil && !errors.Is(err, sas.ErrNotFound) { // not found: gone, so not in flight
			return runDecision{}, fmt.Errorf("reading run %s of schedule %s: %w", st.Running, in.Schedule, err)
		}
		if err == nil {
			busy, err := s.runInFlight(ctx, v)
			if err != nil {
				return runDecision{}, fmt.Errorf("reading run %s of schedule %s: %w", st.Running, in.Schedule, err)
			}
			if busy {
				return runDecision{skip: fmt.Sprintf("the previous run, %s, is in flight", st.Running)}, nil
			}
		}
	}
	claim.Prev, claim.Exclusive = st.Running, true
	return runDecision{claim: claim}, nil
}

// skipRun records a skipped run in its schedule's state and acknowledges
// its trigger.
func (s *Service) skipRun(ctx context.Context, in sas.Intake, why string) error {
	at, _ := sas.ParseScheduledAt(in.ScheduledAt) // checked by decideRun
	st, err := s.cfg.Store.SkipRun(ctx, sas.SkipRunParams{Schedule: in.Schedule, OrderID: in.OrderID, ScheduledAt: at})
	if err != nil {
		return fmt.Errorf("recording the skipped run %s of schedule %s: %w", in.OrderID, in.Schedule, err)
	}
	s.log.InfoContext(ctx, "schedule run skipped", "order", in.OrderID, "schedule", in.Schedule,
		"reason", why, "skipped", st.Skipped)
	return nil
}

func (s *Service) knownSchedule(name string) bool {
	_, ok := s.cfg.Schedules[name]
	return ok
}

// runInFlight reports whether a run's order may still move: not settled,
// or failed with a step in Error whose own undo a compensation is still to
// run (undoable: the step that failed, when it may have taken effect), which
// OrderView.Settled reads as settled in the moment between the failure and
// the claim of that undo (the simulator's seed 9501); or cancelled with a
// step still to undo, which OrderView.Settled reads as settled between the
// step's settling (cancelledDone's Complete) and the claim of the first
// undo (make sim after merging schedules beside cancellation: a skip run
// started beside the cancelled run's undo). A compensation that stopped at
// a failed undo is settled: it waits for an operator.
func (s *Service) runInFlight(ctx context.Context, v sas.OrderView) (bool, error) {
	if !v.Settled() {
		return true, nil
	}
	for _, r := range v.Steps {
		if r.ProcessState == sas.CompensationFailed {
			return false, nil
		}
	}
	w, err := s.workflow(ctx, v.Order.Workflow, v.Order.Version)
	if err != nil {
		return false, err
	}
	cancelled := v.Cancelled()
	for _, r := range v.Steps {
		if (r.ProcessState == sas.Error || cancelled) && r.Step < len(w.Steps) && undoable(r, w.Steps[r.Step], false) {
			return true, nil
		}
	}
	return false, nil
}
