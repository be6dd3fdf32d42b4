package sas

import "fmt"

// CanResubmit says whether an operator may send step `step` of an order
// round again, and if not, why (a *ValidationError, so ErrInvalid). The
// stores apply it to the order as they read it, and sasctl's dry run to the
// order it shows, so both refuse for the same reasons:
//
//   - the step is not in Error (nothing to resubmit);
//   - its give-up still owes its alert or compensate request;
//   - the step is a fan-out that started (ForEachCount): its elements ran
//     under their own keys, and a fan-out does not start twice, so the
//     step would wait for ever; compensate the order instead;
//   - the order is being or has been compensated (a step is Compensating,
//     Compensated or CompensationFailed): a retry would be dropped by the
//     scheduler, the supervisor would give up on it, and a step that never
//     took effect would then be undone.
func CanResubmit(v OrderView, step int) error {
	var rec *StepRecord
	for i := range v.Steps {
		if v.Steps[i].Step == step {
			rec = &v.Steps[i]
		}
	}
	k := StepKey{OrderID: v.Order.OrderID, Step: step}
	if rec == nil {
		return fmt.Errorf("resubmitting step %s: %w", k, ErrNotFound)
	}
	if rec.ProcessState != Error {
		return &ValidationError{Field: "step", Reason: fmt.Sprintf("step %s is %s, not Error: nothing to resubmit", k, rec.ProcessState)}
	}
	if err := resubmitOwing(*rec); err != nil {
		return err
	}
	if rec.ForEachCount > 0 {
		return &ValidationError{Field: "step", Reason: fmt.Sprintf("step %s is a fan-out whose %d elements started: it does not run again; compensate the order", k, rec.ForEachCount)}
	}
	if v.Cancelled() {
		return &ValidationError{Field: "step", Reason: fmt.Sprintf("step %s cannot be resubmitted: order %s was cancelled", k, k.OrderID)}
	}
	for _, r := range v.Steps {
		switch r.ProcessState {
		case Compensating, Compensated, CompensationFailed:
			return &ValidationError{Field: "step", Reason: fmt.Sprintf("step %s cannot be resubmitted: order %s is being or has been compensated (step %d is %s)", k, k.OrderID, r.Step, r.ProcessState)}
		}
	}
	return nil
}

// NewKeyOnResubmit reports whether a resubmit of r starts a new key
// generation: r was refused and no effect of it was seen (UndoOwed), so a
// remote that stored the refusal would replay it under the old key.
func NewKeyOnResubmit(r StepRecord) bool { return r.Refused && !r.UndoOwed }

// ResubmitKeyNote is what an operator is told about a step that runs, or
// ran, under generation gen's key after the generation before it was
// refused (sasctl's resubmit and its dry run; the scheduler's alert when
// the step completes). A refusal is not proof of no effect
// (docs/protocol.md): a twin delivery of the refused request may have
// succeeded under the older key, its reply lost, and nothing undoes that
// effect unless the order is compensated.
func ResubmitKeyNote(orderID string, step, gen int) string {
	old, cur := IdempotencyKey(orderID, step, gen-1, false), IdempotencyKey(orderID, step, gen, false)
	return fmt.Sprintf("step %d of order %s runs under a new key, %s, after it was refused under %s; a refusal is not proof of no effect: "+
		"if a twin delivery succeeded under %s (its reply lost), the step's effect exists under both keys. Check %s at the service; "+
		"a compensation of the order undoes both", step, orderID, cur, old, old, old)
}
