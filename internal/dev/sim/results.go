package sim

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/sas"
)

// Results that flow and business rejections (issue 27; docs/simulation.md,
// "Invariants"). The remote returns a result for every do but the third
// step's (so that some steps return nothing), its refusals are business
// rejections in the runs that say so, and two rules hold the system to
// them:
//   - "results seen": every call sees exactly the results recorded for the
//     steps its step follows (an undo: its own step's too), checked at the
//     call against the store as it stands;
//   - "rejection paged": an operator is never alerted about a step's
//     failure that was a business rejection.

// Planted bugs of these rules (TestChecksCatchPlantedBugs).
const (
	// SabotageStaleResults: the scheduler's reads of an order miss the
	// newest result recorded (a read that is not consistent), so a request
	// built from one carries fewer results than the store holds.
	SabotageStaleResults = "stale-results"
	// SabotagePageRejections: the store forgets that a failure was a
	// rejection (FailParams.Rejected), so the order is alerted about.
	SabotagePageRejections = "page-rejections"
)

// rejectReason is the reason the remote gives a business rejection: the
// history of the step it failed says so, which "rejection paged" reads.
const rejectReason = "rejected (injected)"

// rejecting reports whether the remote's refusals are business rejections
// in this run: when the configuration says so, and in a third of the seeds
// besides (drawn from the seed apart from ForSeed's draws, so that every
// other choice of a seed stays as it was).
func (c Config) rejecting() bool {
	if c.Rejections || c.Sabotage == SabotagePageRejections {
		return true
	}
	x := uint64(c.Seed) * 0x9e3779b97f4a7c15 // splitmix64's increment and finaliser
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	return x%3 == 0
}

// refusalReason is the reason of a fresh refusal of a do.
func (r *remote) refusalReason() string {
	if r.w.cfg.rejecting() {
		return rejectReason
	}
	return "refused (injected)"
}

// refusal is the error a refusal (fresh, or stored and replayed) answers
// with: a rejection or a permanent failure, by its reason.
func (r *remote) refusal(reason string) error {
	if strings.HasPrefix(reason, rejectReason) {
		r.w.tracef("  remote: rejected (a business outcome)")
		return agent.Reject(errors.New(reason))
	}
	return agent.Permanent(errors.New(reason))
}

// resultOf is what the remote answers a do with: its key, but nothing for
// a third step (whatever it is called), so that a step's request also
// shows the steps that returned nothing.
func resultOf(req agent.Request, doKey string) any {
	if req.StepIndex == 2 {
		return nil
	}
	return map[string]string{"done": doKey}
}

// checkResults is the rule "results seen": a call carries exactly the
// results recorded on the records of the steps before its step (and, for
// an undo, its own step's). A step's result is written once, when it
// completes, and those steps completed before the request was sent, so
// the store as it stands at the call is what the request had to carry.
func (w *World) checkResults(req agent.Request) {
	v, err := w.view(req.OrderID)
	if err != nil {
		return // "unknown order" says so
	}
	want := v.ResultsFor(req.StepIndex, req.Undo) // in a graph, the steps it follows transitively
	if isElement(req) && req.Undo {
		want = w.elementUndoResults(v, req) // fanout.go
	}
	if !sameResults(want, req.Results) {
		w.violate("results seen", "order %s step %d (%s, undo %v) was called with results %s; the store records %s for the steps it follows",
			req.OrderID, req.StepIndex, req.Step, req.Undo, showResults(req.Results), showResults(want))
	}
}

func sameResults(a, b sas.Results) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok || !bytes.Equal(va, vb) {
			return false
		}
	}
	return true
}

func showResults(r sas.Results) string {
	if len(r) == 0 {
		return "none"
	}
	var parts []string
	for k, v := range r {
		parts = append(parts, k+"="+string(v))
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, " ") + "}"
}

// checkRejectionsUnpaged is the rule "rejection paged": no alert is about
// a step's move to Error that was a business rejection (its history entry
// to Error at the alert's attempt carries the remote's rejection), whether
// the order then ends Rejected or, after an operator's resubmit, otherwise.
func (w *World) checkRejectionsUnpaged() {
	for _, a := range w.alerts {
		key := sas.StepKey{OrderID: a.OrderID, Step: a.Step}
		if a.State != sas.Error || a.ID != sas.AlertID(key, sas.Error, a.Attempts) {
			continue // another event (an undo's failure, an effect under an older key)
		}
		r, err := w.mem.GetStep(context.Background(), key)
		if err != nil {
			continue
		}
		for _, h := range r.History {
			if h.To == sas.Error && h.Attempt == a.Attempts && strings.HasPrefix(h.Reason, rejectReason) {
				w.violate("rejection paged", "step %v was rejected as a business outcome at attempt %d and an operator was alerted (%s)", key, a.Attempts, a.ID)
			}
		}
	}
}

// staleResults is SabotageStaleResults: the view without the result of its
// newest step that has one.
func staleResults(v sas.OrderView) sas.OrderView {
	steps := slices.Clone(v.Steps)
	for i := len(steps) - 1; i >= 0; i-- {
		if len(steps[i].Result) > 0 {
			steps[i].Result = nil
			break
		}
	}
	v.Steps = steps
	return v
}
