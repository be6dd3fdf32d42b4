package sim

import (
	"context"

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
