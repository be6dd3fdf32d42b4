package sim

import (
	"strings"

	"github.com/sas-go/sas/internal/sas"
)

// checkOneEventPerID: two events never share an alert id (issue 29, N5).
// checkAlerts holds one event to one id; this holds one id to one event. An
// id that is a step's state at an attempt (sas.AlertID) names exactly that:
// every alert under it is about that order, step, state and attempt, for
// one reason (a re-send rebuilds the same alert; whoever re-sends it, so
// its source may differ: the supervisor's give-up re-sent by the
// scheduler's compensation claim). An id
// with a suffix names its event itself ("stale/g0": one per older key,
// whichever attempt reports it), so only its order and step must agree.
func (w *World) checkOneEventPerID() {
	first := map[string]sas.Alert{}
	for _, a := range w.alerts {
		if a.ID == "" {
			continue // checkAlerts' "alert without id"
		}
		prev, ok := first[a.ID]
		if !ok {
			first[a.ID] = a
			continue
		}
		same := prev.OrderID == a.OrderID && prev.Step == a.Step
		if a.ID == sas.AlertID(sas.StepKey{OrderID: a.OrderID, Step: a.Step}, a.State, a.Attempts) {
			same = same && prev.State == a.State && prev.Attempts == a.Attempts &&
				strings.TrimSpace(prev.Reason) == strings.TrimSpace(a.Reason)
		}
		if !same {
			w.violate("two events under one id", "alert id %s names %s/%d %s attempt %d (%s: %q) and %s/%d %s attempt %d (%s: %q)", a.ID,
				prev.OrderID, prev.Step, prev.State, prev.Attempts, prev.Source, prev.Reason,
				a.OrderID, a.Step, a.State, a.Attempts, a.Source, a.Reason)
		}
	}
}
