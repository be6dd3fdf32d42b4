package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// Cancel is the store's cancel write. A mark on a step in flight that is
// there already writes nothing, so its retry answers as the first call
// did (as NoteEffect); a Pending step's move to Error is a write like any
// other, ambiguous commits included. Every cancel the store accepted is
// remembered: its order must end Cancelled with nothing standing
// (checkCancelled).
func (s *store) Cancel(ctx context.Context, p sas.CancelParams) (sas.StepRecord, error) {
	var r sas.StepRecord
	var err error
	switch {
	case p.From == sas.Processing && s.w.cfg.Sabotage == SabotageForgetCancel:
		stop(ctx, opWrite, "Cancel %v (sabotaged: forgotten)", p.Key)
		r, err = s.mem.GetStep(context.Background(), p.Key)
		if err == nil && (r.ProcessState != p.From || r.Attempt != p.Attempt) {
			err = &sas.RaceError{Op: "cancel", Key: p.Key, Current: &r}
		}
		r.Cancelled = err == nil
	case p.From == sas.Processing:
		if stop(ctx, opWrite, "Cancel %v", p.Key).fault == faultUnavailable {
			return sas.StepRecord{}, errUnavailable
		}
		before := s.snapshot([]sas.StepKey{p.Key})
		r, err = s.mem.Cancel(ctx, p)
		if err == nil {
			s.w.wrote(ctx, "Cancel", before, s.snapshot([]sas.StepKey{p.Key}))
		}
	default:
		r, err = write(ctx, s, "Cancel", []sas.StepKey{p.Key}, func() (sas.StepRecord, error) { return s.mem.Cancel(ctx, p) })
	}
	if cur, gerr := s.mem.GetStep(context.Background(), p.Key); (gerr == nil && cur.Cancelled) || (err == nil && r.Cancelled) {
		s.w.cancelAccepted[p.Key.OrderID] = true // made, or answered as made (sabotaged)
	}
	return r, err
}

// cancelEvent cancels an order, mostly one still running: from its
// submitter (a cancel on the intake queue, as the application sends it)
// or from an operator (sasctl cancel, a task of its own).
func (w *World) cancelEvent() {
	w.cancelsLeft--
	id := w.orders[w.rng.IntN(len(w.orders))]
	var running []string
	for _, o := range w.orders {
		if v, err := w.mem.GetOrder(context.Background(), o); err == nil && !final(v) {
			running = append(running, o)
		}
	}
	if len(running) > 0 && w.rng.IntN(4) > 0 {
		id = running[w.rng.IntN(len(running))]
	}
	if w.rng.IntN(2) == 0 {
		w.operate("cancel", id)
		return
	}
	body := sas.Encode(sas.Cancel{V: sas.MessageVersion, Kind: sas.KindCancel, OrderID: id, Reason: "the customer changed their mind"})
	w.nextMsg++
	m := &message{id: fmt.Sprintf("m%d", w.nextMsg), body: body, sentAt: w.clock.Now(), visibleAt: w.clock.Now(), sender: "application"}
	w.intake.msgs = append(w.intake.msgs, m)
	w.tracef("submitter cancels %s", id)
}

// checkCancelled: a cancelled order ends with nothing standing (issue 28
// §4, §7). Every order whose cancel the store accepted ends Cancelled (or
// CompensationFailed: an undo failed, and an operator was told, which
// checkAlerts holds); no step after the one the cancel landed on ever
// started; and no effect of a step with an undo is left at the remote
// (checkEffects, for Cancelled as for Compensated).
func (w *World) checkCancelled() {
	for _, id := range w.orders {
		if !w.cancelAccepted[id] {
			continue
		}
		v, err := w.mem.GetOrder(context.Background(), id)
		if err != nil {
			continue // "order lost" says so
		}
		switch st := v.State(); st {
		case sas.Cancelled, sas.CompensationFailed:
		default:
			w.violate("cancel ignored", "order %s was cancelled and ended %s (%s)", id, st, steps(v))
			continue
		}
		// No step started after the cancel landed: no forward claim later
		// than the mark. (By time, not by position: in a workflow with
		// branches, a step after the marked one may be a branch that ran,
		// or was skipped, before the cancel.)
		marked := slices.IndexFunc(v.Steps, func(r sas.StepRecord) bool { return r.Cancelled })
		if marked < 0 {
			continue
		}
		var at time.Time
		for _, h := range v.Steps[marked].History {
			if strings.HasPrefix(h.Reason, "cancel requested by ") {
				at = h.At
				break
			}
		}
		for _, r := range v.Steps {
			if r.Step == marked {
				continue // the marked step itself is let to settle (its retries included)
			}
			for _, h := range r.History {
				if h.From == sas.Pending && h.To == sas.Processing && !at.IsZero() && h.At.After(at) {
					w.violate("started after its cancel", "order %s was cancelled at step %d at %s and step %d started at %s (%s)",
						id, marked, at.Format(time.RFC3339Nano), r.Step, h.At.Format(time.RFC3339Nano), steps(v))
				}
			}
		}
	}
}
