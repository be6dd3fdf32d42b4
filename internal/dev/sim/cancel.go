package sim

import (
	"context"
	"fmt"
	"slices"

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
	if sas.IsElement(p.Key.Step) {
		// The mark of an element in flight, by its fan-out's failure or
		// by the cancel of its order (whose steps' marks are the cancel's
		// landing): fanout.go.
		return r, err
	}
	if cur, gerr := s.mem.GetStep(context.Background(), p.Key); (gerr == nil && cur.Cancelled) || (err == nil && r.Cancelled) {
		if !s.w.cancelAccepted[p.Key.OrderID] {
			s.w.landed(p.Key.OrderID)
		}
		s.w.cancelAccepted[p.Key.OrderID] = true // made, or answered as made (sabotaged)
	}
	return r, err
}

// landed notes, at the first mark the store accepted for the order (in
// the order writes commit, not by their writers' clocks), the steps that
// had never been claimed: none of them may start after (checkCancelled).
func (w *World) landed(id string) {
	v, err := w.view(id)
	if err != nil {
		return
	}
	var unstarted []int
	flying := 0
	for _, r := range v.Steps {
		if r.Attempt == 0 {
			unstarted = append(unstarted, r.Step)
		}
		if r.InFlight() {
			flying++
		}
	}
	w.unstartedAtCancel[id] = unstarted
	if flying > 1 {
		w.cancelsWhileBranching++
		w.tracef("  the cancel of %s lands while %d of its steps are in flight", id, flying)
	}
}

// cancelEvent cancels an order, mostly one still running: from its
// submitter (a cancel on the intake queue, as the application sends it)
// or from an operator (sasctl cancel, a task of its own).
func (w *World) cancelEvent() {
	w.cancelsLeft--
	id := w.orders[w.rng.IntN(len(w.orders))]
	var running []string
	for _, o := range w.orders {
		if v, err := w.view(o); err == nil && !final(v) {
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
// checkAlerts holds); no step that had not started when the cancel landed
// ever started; and no effect of a step with an undo is left at the remote
// (checkEffects, for Cancelled as for Compensated).
func (w *World) checkCancelled() {
	for _, id := range w.orders {
		if !w.cancelAccepted[id] {
			continue
		}
		v, err := w.view(id)
		if err != nil {
			continue // "order lost" says so
		}
		switch st := v.State(); st {
		case sas.Cancelled, sas.CompensationFailed:
		default:
			w.violate("cancel ignored", "order %s was cancelled and ended %s (%s)", id, st, steps(v))
			continue
		}
		// No step started after the cancel landed: none that had never
		// been claimed when the store accepted the order's first mark was
		// claimed since, unless a mark landed on it too (a step ready then,
		// whose claim won the race with its mark, is let to settle like any
		// step in flight). Judged in the order the writes committed: by
		// position in a workflow with branches, a step after the marked one
		// may be a branch that ran before the cancel, and by the writers'
		// clocks, a claim committed first may carry a later time.
		for _, r := range v.Steps {
			if slices.Contains(w.unstartedAtCancel[id], r.Step) && r.Attempt > 0 && !r.Cancelled {
				w.violate("started after its cancel", "order %s: step %d had never started when its cancel landed, and started since (%s)",
					id, r.Step, steps(v))
			}
		}
	}
}
