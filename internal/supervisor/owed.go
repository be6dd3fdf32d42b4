package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
)

// effects is what one page sends once its writes are done: one outbox unit
// per record, and for a give-up the record to settle once its unit got out.
type effects struct {
	batch  outbox.Batch
	recs   []sas.StepRecord   // by unit id: the record as written
	states []sas.ProcessState // by unit id: the state it was swept in, for the report
	owing  []bool             // by unit id: a give-up whose effects are owed
}

// unit returns a new unit for rec, swept in state.
func (e *effects) unit(rec sas.StepRecord, state sas.ProcessState) *outbox.Unit {
	e.recs = append(e.recs, rec)
	e.states = append(e.states, state)
	e.owing = append(e.owing, false)
	return e.batch.Unit(len(e.recs) - 1)
}

// owe adds what a given-up record owes, in the order it is sent: the alert
// first, then the compensate request. The order matters: the scheduler's
// compensation claim (which the request causes) moves the record out of
// Error and clears what it owes, so the alert must already be out by then.
// The cost: while alerting fails, the compensation waits for it.
func (r *sweep) owe(rec sas.StepRecord, state sas.ProcessState, out *effects) {
	u := out.unit(rec, state)
	out.owing[len(out.owing)-1] = true
	for _, eff := range rec.Owes {
		switch eff {
		case sas.EffectAlert:
			u.Alert(rec.OwedAlert(AlertSource))
		case sas.EffectCompensate:
			c := rec.OwedCompensate(r.s.cfg.Actor)
			c.Trace = sas.ChildTrace(r.traces[rec.OrderID], fmt.Sprintf("%s %s %d", sas.KindCompensate, rec.Key(), rec.Attempt))
			u.Send(outbox.Message{
				QueueURL: r.s.cfg.ControlQueueURL, What: "compensate for " + rec.OrderID,
				Body: sas.Encode(c),
			})
		}
	}
}

// flush sends the page's effects in one batch. A retry that was not sent
// loses nothing: the step is Pending with a pick-up deadline and a later
// sweep re-drives it. A give-up whose effects all went out is settled; one
// whose effects did not stays owed, and a later sweep sends them again.
func (r *sweep) flush(out *effects) {
	cfg := r.s.cfg
	failed := map[int]error{}
	for _, f := range out.batch.Flush(r.ctx, outbox.Sink{Queue: cfg.Queue, Alerter: taggedAlerter{cfg.Alerter}, Logger: cfg.Logger}) {
		failed[f.Unit] = f.Err
	}
	for i, rec := range out.recs {
		if err, bad := failed[i]; bad {
			if isAlertErr(err) {
				r.rep.AlertFailures++
			} else {
				r.rep.SendFailures++
			}
			if out.owing[i] {
				r.leftOwed(rec)
				err = fmt.Errorf("%w (still owed: a later sweep sends it again)", err)
			}
			r.fail(out.states[i], fmt.Errorf("effects of step %s: %w", rec.Key(), err))
			continue
		}
		if out.owing[i] {
			r.settle(rec, out.states[i])
		}
	}
}

// settle clears what rec owed once it all went out, or, when that was a
// compensate request, leaves it owed until the compensation it asks for
// starts: the scheduler settles it then (its claim, or its Settle when
// nothing is left to claim), and a later sweep sends it again at
// CompensateRecheck if it has not (a request dead-lettered in an outage;
// issue 29, N6). A lost race means the record moved on (the scheduler's
// compensation claim, which settles it too) or another supervisor settled
// it: nothing is left owed either way.
func (r *sweep) settle(rec sas.StepRecord, state sas.ProcessState) {
	p := sas.SettleParams{Key: rec.Key(), State: rec.ProcessState, Attempt: rec.Attempt}
	if rec.OwesCompensate() {
		p.Recheck, p.OwedAt = r.s.cfg.Clock.Now().Add(r.s.cfg.CompensateRecheck), rec.OwedAt
	}
	_, err := r.s.cfg.Store.Settle(r.ctx, p)
	switch {
	case err == nil && !p.Recheck.IsZero():
		r.rep.Awaiting++
	case err == nil:
		r.rep.Settled++
	case errors.Is(err, sas.ErrLostRace):
		r.rep.LostRaces++
		r.s.cfg.Logger.LogAttrs(r.ctx, slog.LevelDebug, "settle lost the race", stepAttrs(rec, slog.String("err", err.Error()))...)
	default:
		// Sent but not settled: a later sweep sends it again, with the same
		// alert id and the same compensate request.
		r.leftOwed(rec)
		r.fail(state, fmt.Errorf("settling the effects of step %s: %w", rec.Key(), err))
	}
}

// leftOwed counts a give-up this run leaves owed, and its age.
func (r *sweep) leftOwed(rec sas.StepRecord) {
	r.rep.Owed++
	if age := r.s.cfg.Clock.Now().Sub(rec.UpdatedAt); age > r.rep.OwedOldestAge {
		r.rep.OwedOldestAge = age
	}
}

// owed re-sends what earlier give-ups still owe: their run died between the
// give-up write and the settle, or a send failed. Page by page, like the
// deadline sweep, each record at most once per run.
func (r *sweep) owed() {
	cfg := r.s.cfg
	for r.stop() == "" {
		res, err := cfg.Store.FindOwed(r.ctx, sas.FindOwedParams{Now: cfg.Clock.Now(), Limit: cfg.PageSize})
		r.rep.Pages++
		if err != nil {
			r.fail(sas.Error, fmt.Errorf("finding owed effects: %w", err))
			return
		}
		r.rep.Reads.Requests += res.Stats.Requests
		r.rep.Reads.ItemsRead += res.Stats.ItemsRead
		var out effects
		for _, rec := range res.Records {
			if r.seen[rec.Key()] || len(out.recs) == cfg.PageSize {
				continue
			}
			r.seen[rec.Key()] = true
			r.rep.Redriven++
			cfg.Logger.LogAttrs(r.ctx, slog.LevelInfo, "re-sending what a give-up owes", stepAttrs(rec, slog.Any("owes", rec.Owes))...)
			r.owe(rec, rec.ProcessState, &out)
		}
		if len(out.recs) == 0 {
			return
		}
		r.flush(&out)
	}
}

// isAlertErr tells an alerter's failure from a send's, for the report.
func isAlertErr(err error) bool {
	var ae alertError
	return errors.As(err, &ae)
}

type alertError struct{ error }

func (e alertError) Unwrap() error { return e.error }

// taggedAlerter marks the alerter's errors as alertError.
type taggedAlerter struct{ sas.Alerter }

func (a taggedAlerter) Alert(ctx context.Context, al sas.Alert) error {
	if err := a.Alerter.Alert(ctx, al); err != nil {
		return alertError{err}
	}
	return nil
}
