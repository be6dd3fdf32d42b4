package supervisor

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// decideFanOutUndo is the decision on the due undo of a fan-out step (its
// own record, lim.FanOut, Compensating and held). That undo is its
// elements' undos, one at a time, each an agent request held to its own
// deadline and rescued by itself (docs/decisions.md, "Fan-out elements are
// records of their own"), so:
//   - while an element is held (its undo running, or a marked element
//     settling before any is undone), the step's undo is waited on for a
//     step timeout more (at least a pick-up timeout): a chain of a
//     thousand undos outlives the step's own deadline with nothing
//     stalled, and no failure is counted;
//   - otherwise the chain stopped between two elements (the handler that
//     would claim the next died or failed, and the message that would
//     carry it on may be gone): the step's undo is re-driven at its
//     deadline (its dispatch claims the next element's undo), not at a
//     delivery horizon days away, since it has no request of its own that
//     could still be queued; and as a lost request's re-drive, with no
//     failure counted: nothing of it ran that could fail (its elements
//     count their own failures and are given up by their own policy).
//
// Whether the step is a fan-out comes from its limits: the index the sweep
// pages through does not project the record's element count. A failed
// read leaves the step to a later sweep (ok false); a store that keeps no
// elements (no fan-out ran on it) leaves decided, the policy's decision.
func (r *sweep) decideFanOutUndo(rec sas.StepRecord, lim sas.StepLimits, now time.Time, decided decision) (d decision, ok bool) {
	if _, keeps := r.s.cfg.Store.(sas.FanOutStore); !keeps {
		return decided, true
	}
	r.rep.Reads.Requests++ // the first page; a fan-out of more pages reads more
	els, err := sas.AllElements(r.ctx, r.s.cfg.Store, rec.Key())
	if err != nil {
		r.s.cfg.Logger.LogAttrs(r.ctx, slog.LevelWarn, "reading a fan-out's elements; its undo is left to a later sweep",
			stepAttrs(rec, slog.String("err", err.Error()))...)
		return decision{}, false
	}
	held := -1
	for _, e := range els {
		if e.LockedBy != "" && (e.ProcessState == sas.Processing || e.ProcessState == sas.Compensating) {
			_, held = sas.ElementOf(e.Step)
			break
		}
	}
	// The next look is a step timeout on (at least a pick-up timeout), not
	// the held element's deadline: that element may be given up long
	// before it (an element never picked up is waited on to its delivery
	// horizon), and the chain must then move on (the simulator's seed 11
	// of TestARedriveFinishesWhatItsDeadLetterHeld).
	until := now.Add(max(r.s.policy.PickupTimeout, lim.Timeout))
	if held >= 0 {
		return decision{Action: wait, Failures: rec.FailureCount, Until: until,
			Reason: fmt.Sprintf("its elements are undone one at a time, each held to its own deadline (element %d is held)", held)}, true
	}
	return decision{Action: rescue, Lost: true, Failures: rec.FailureCount,
		Reason: fmt.Sprintf("undo attempt %d holds none of its elements by its deadline %s: the chain of element undos stopped between two of them; re-driven, not a failure",
			rec.Attempt, rec.DueAt.UTC().Format(time.RFC3339))}, true
}

// fanOutUndo reports whether rec is the held undo of a fan-out step
// (decideFanOutUndo), not one of its elements.
func fanOutUndo(rec sas.StepRecord, lim sas.StepLimits) bool {
	return lim.FanOut && rec.ProcessState == sas.Compensating && rec.LockedBy != "" && !sas.IsElement(rec.Step)
}
