package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sas-go/sas/internal/sas"
)

// settled reports whether the run is over: no message left in any queue
// an actor takes, no dead letter the operator has not redriven, and every
// order in a final state that nothing moves on its own
// (docs/simulation.md, "Invariants").
func (w *World) settled() bool {
	for _, q := range w.queues {
		if q.consumer != "" && q.live() > 0 {
			return false
		}
		if q.dlq != nil && slices.ContainsFunc(q.dlq.msgs, func(m *message) bool { return !m.redriven }) {
			// The operator answers its alarm (redrive.go) before the run
			// ends, even with every order final: a final status the dead
			// letter alone owed is posted by its redrive (seed 1339).
			return false
		}
		q.compact()
	}
	for _, id := range w.orders {
		v, err := w.view(id)
		if w.poisonedAway(id, err) {
			continue
		}
		if err != nil || !final(v) {
			return false
		}
	}
	return true
}

// poisonedAway: order id was never stored, its intake being in the
// dead-letter queue as a poison message (World.poisoned).
func (w *World) poisonedAway(id string, err error) bool {
	return (w.poisoned[id] || w.skippedRun(id)) && errors.Is(err, sas.ErrNotFound)
}

// final reports whether nothing will move an order on its own: no step
// held, ready or owing a give-up's effects, and the order in a final state.
func final(v sas.OrderView) bool {
	for _, r := range v.Steps {
		switch {
		case r.ProcessState.Leased(), r.Owing():
			return false
		case r.ProcessState == sas.Pending && !r.DueAt.IsZero():
			return false
		}
	}
	switch v.State() {
	case sas.Processed, sas.Compensated, sas.Error, sas.CompensationFailed, sas.Rejected, sas.Cancelled:
		return len(v.Steps) > 0
	}
	return false
}

// unsettled reports the orders a run that hit its bound left unfinished.
func (w *World) unsettled() {
	var parts []string
	for _, id := range w.orders {
		v, err := w.view(id)
		switch {
		case w.poisonedAway(id, err):
		case err == nil && w.waitsOnItsRedrive(id, v): // goodput.go
		case errors.Is(err, sas.ErrNotFound):
			parts = append(parts, id+" never stored")
		case err != nil:
			parts = append(parts, fmt.Sprintf("%s: %v", id, err))
		case !final(v):
			parts = append(parts, fmt.Sprintf("%s is %s: %s%s", id, v.State(), steps(v), w.elementStates(v)))
		}
	}
	for _, q := range w.queues {
		if q.consumer != "" && q.live() > 0 {
			parts = append(parts, fmt.Sprintf("%s holds %d messages", q.name, q.live()))
		}
	}
	if len(parts) == 0 {
		return // what is left is the operator's (waitsOnItsRedrive)
	}
	w.violate("no progress", "after %d events and %s of calm: %s", w.events,
		w.clock.Now().Sub(w.calmSince).Round(1e9), strings.Join(parts, "; "))
}

func steps(v sas.OrderView) string {
	var parts []string
	for _, r := range v.Steps {
		s := fmt.Sprintf("%d:%s a%d g%d", r.Step, r.ProcessState, r.Attempt, r.Generation)
		if r.DueAt.IsZero() && r.ProcessState == sas.Pending {
			s += " (no due time)"
		}
		if r.UndoOwed {
			s += " undo-owed"
		}
		if r.Owing() {
			s += fmt.Sprintf(" owes %v", r.Owes)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// final checks, once every order settled, what the run did against what
// must hold of it.
func (w *World) final() {
	w.tracef("settled; checking")
	for _, id := range w.orders {
		v, err := w.view(id)
		if w.poisonedAway(id, err) {
			continue
		}
		if err != nil {
			w.violate("order lost", "order %s: %v", id, err)
			continue
		}
		w.checkEffects(v)
		w.checkStatuses(v)
		w.checkConditions(v)
		w.checkGivenUp(v) // callbacks.go
	}
	w.checkAlerts()
	w.checkRejectionsUnpaged()
	w.checkCancelled()
	w.checkOneEventPerID()
	w.checkForged()
	w.checkRuns()
	for _, q := range w.queues {
		if q.dlq == nil {
			continue
		}
		if n := slices.IndexFunc(q.dlq.msgs, func(m *message) bool { return !m.poison }); n >= 0 {
			w.violate("dead-lettered", "%s holds message %s, which a handler of its last receives let go", q.dlq.name, q.dlq.msgs[n].id)
		}
	}
}

// alerted reports whether an operator was told of something about an
// order's step (any step when step < 0).
func (w *World) alerted(order string, step int) bool {
	return slices.ContainsFunc(w.alerts, func(a sas.Alert) bool {
		return a.OrderID == order && (step < 0 || a.Step == step)
	})
}

// checkEffects holds what the remote did to what the order says: a
// Processed order has exactly its steps' effects, under the keys of their
// last generation; a Compensated one has every undoable effect undone;
// anything else an operator was told about.
func (w *World) checkEffects(v sas.OrderView) {
	id := v.Order.OrderID
	def := w.defs[v.Order.Version]
	live := w.remote.live(id)
	state := v.State()
	for step, keys := range live {
		undoable := step < len(def.Steps) && def.Steps[step].Undo != ""
		var rec sas.StepRecord
		if step < len(v.Steps) {
			rec = v.Steps[step]
		}
		own := sas.IdempotencyKey(id, step, rec.Generation, false)
		switch state {
		case sas.Compensated, sas.Rejected, sas.Cancelled:
			if undoable {
				w.violate("effect not undone", "order %s is %s but step %d (%s) still has the effect of %v (%s)", id, state, step, rec.StepName, keys, steps(v))
			}
		case sas.Processed:
			if step < len(def.Steps) && def.Steps[step].ForEach != nil {
				w.checkFanOutEffects(v, step, rec, keys) // fanout.go
				continue
			}
			for _, k := range keys {
				if k != own && !w.alerted(id, step) {
					w.violate("effect twice", "order %s is Processed and step %d has effects under %v; only %s is its own, and nobody was told (%s)", id, step, keys, own, steps(v))
				}
			}
		default:
			if !w.alerted(id, -1) {
				w.violate("effect untold", "order %s ended %s with step %d's effect %v in place and no alert", id, state, step, keys)
			}
		}
	}
	if state == sas.Processed {
		for i, r := range v.Steps {
			if i < len(def.Steps) && def.Steps[i].Agentless() {
				continue // a wait step, or a callback step without an agent: nothing at the remote is its own
			}
			if r.ProcessState == sas.Skipped {
				if len(live[i]) > 0 {
					w.violate("skipped called", "order %s step %d (%s) was skipped and has effects %v", id, i, r.StepName, live[i])
				}
				continue // never called: no effect is its own
			}
			if def.Steps[i].ForEach != nil {
				if len(orderItems(v.Order.Payload)) > 0 && len(live[i]) == 0 {
					w.violate("effect missing", "order %s is Processed but fan-out step %d has no element's effect at the remote (%s)", id, i, steps(v))
				}
				continue // its elements' effects (checkFanOutEffects)
			}
			own := sas.IdempotencyKey(id, i, r.Generation, false)
			if !slices.Contains(live[i], own) {
				w.violate("effect missing", "order %s is Processed but step %d's effect under %s is not at the remote (%s)", id, i, own, steps(v))
			}
		}
	}
}

// checkStatuses holds the statuses the submitter got to how the order
// ended.
func (w *World) checkStatuses(v sas.OrderView) {
	id := v.Order.OrderID
	got := map[string]bool{}
	failedSteps := map[string]bool{}
	for _, s := range w.statuses[id] {
		got[s.Status] = true
		if s.Status == sas.StatusFailed {
			failedSteps[s.Step] = true
		}
	}
	switch v.State() {
	case sas.Processed:
		// A poison message's order is the operator's (the dead-letter
		// queue's alarm): the processed status its last reply alone would
		// have posted is not required (docs/simulation.md, seed 21206).
		if !got[sas.StatusProcessed] && !w.poisoned[id] {
			w.violate("status missing", "order %s is Processed and its submitter was never told", id)
		}
	case sas.Compensated:
		if !got[sas.StatusCompensated] {
			w.violate("status missing", "order %s is Compensated and its submitter was never told", id)
		}
	case sas.Rejected:
		if !got[sas.StatusRejected] {
			w.violate("status missing", "order %s is Rejected and its submitter was never told", id)
		}
	case sas.Cancelled:
		if !got[sas.StatusCancelled] {
			w.violate("status missing", "order %s is Cancelled and its submitter was never told", id)
		}
	}
	for _, f := range w.gaveUp {
		if f.key.OrderID == id && f.state == sas.Error && !w.resubmitted[f.id()] && !w.poisoned[id] && f.key.Step < len(v.Steps) && !failedSteps[v.Steps[f.key.Step].StepName] && !v.Steps[f.key.Step].Cancelled {
			w.violate("status missing", "step %v went to Error (%s, attempt %d) and the submitter was never told it failed", f.key, f.by, f.attempt)
		}
	}
}

// checkAlerts: every step moved to Error or CompensationFailed has its
// alert, and one event is one alert: every alert carries an id, and the
// same event re-sent carries the same one (so a redelivery pages nobody
// twice).
func (w *World) checkAlerts() {
	for _, f := range w.gaveUp {
		if !w.resubmitted[f.id()] && !w.poisoned[f.key.OrderID] && !slices.ContainsFunc(w.alerts, func(a sas.Alert) bool {
			return a.OrderID == f.key.OrderID && a.Step == f.key.Step && a.State == f.state && a.Attempts == f.attempt
		}) {
			w.violate("not alerted", "step %v went to %s at attempt %d (%s) and no alert went out", f.key, f.state, f.attempt, f.by)
		}
	}
	ids := map[string]string{}
	for _, a := range w.alerts {
		if a.ID == "" {
			w.violate("alert without id", "the %s alert about %s/%d %s attempt %d has no id", a.Source, a.OrderID, a.Step, a.State, a.Attempts)
			continue
		}
		// The kind of event is what an id adds to sas.AlertID (a failure
		// has nothing; "stale/g0", say, for an effect under an older key).
		// Any other id names its event itself.
		event := a.ID
		if base := sas.AlertID(sas.StepKey{OrderID: a.OrderID, Step: a.Step}, a.State, a.Attempts); strings.HasPrefix(a.ID, base) {
			event = base + " " + strings.TrimPrefix(a.ID, base)
		}
		if prev, ok := ids[event]; ok && prev != a.ID {
			w.violate("alerted twice", "the event %s was alerted under two ids, %s and %s", event, prev, a.ID)
		}
		ids[event] = a.ID
	}
}

// view reads an order as the console and the test kit do: with the
// definition its version runs on (sas.OrderView.Def), so that its State and
// Settled know which steps have an undo.
func (w *World) view(id string) (sas.OrderView, error) {
	v, err := w.mem.GetOrder(context.Background(), id)
	if def, ok := w.defs[v.Order.Version]; err == nil && ok && len(def.Steps) == len(v.Order.Steps) {
		v.Def = &def
	}
	return v, err
}
