package sim

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// Goodput under bursts (issue 31, docs/protocol.md "Deadlines start at
// pick-up"). A burst is more orders at the start than the agents serve
// before the first deadlines pass: each agent delivery takes ServiceTime of
// virtual time (and each scheduler delivery a tenth of it), so the backlog
// outlasts the pick-up allowance and most requests are picked up late. The rule: no step fails by waiting. The
// supervisor counts a failure (a rescue or a give-up that bumps
// FailureCount) only of an attempt an agent picked up; an attempt whose
// request no agent has received yet has not failed, however long it waited
// (the agents here always make progress: they are only busy).

// burstOrders and burstService are a burst seed's extra orders and the
// agents' time per request (ForSeed draws a burst for one seed in eight).
const (
	burstOrders  = 24
	burstService = 3 * time.Second
)

// drawBurst draws a seed's burst: none, mostly.
func drawBurst(r *rand.Rand) (orders int, service time.Duration) {
	if r.IntN(8) != 0 {
		return 0, 0
	}
	return burstOrders, burstService
}

// pickedAttempt is one attempt of one step whose request an agent received.
type pickedAttempt = reportedAttempt

// schedulerShare is how much faster a scheduler handles a message than an
// agent runs a request in a burst seed: a few store calls against a remote
// call.
const schedulerShare = 10

// serve is a consumer's time for one delivery, and notes the attempts
// whose requests an agent picks up. In a burst seed a scheduler's delivery
// costs time too (ServiceTime / schedulerShare a message), so its queue
// backs up behind the burst's intakes, replies and pick-up reports as the
// agents' does, and a reply or a report reaches the store late.
func (w *World) serve(q *queue, in []sas.InboundMessage) {
	if q.consumer == "" {
		return
	}
	if q.consumer == "scheduler" {
		if w.cfg.ServiceTime > 0 {
			w.clock.Advance(w.cfg.ServiceTime / schedulerShare * time.Duration(len(in)))
		}
		return
	}
	for _, m := range in {
		var req struct {
			OrderID string `json:"orderId"`
			Step    int    `json:"step"`
			Attempt int    `json:"attempt"`
		}
		if json.Unmarshal([]byte(m.Body), &req) == nil {
			if w.picked == nil {
				w.picked = map[pickedAttempt]bool{}
			}
			w.picked[pickedAttempt{sas.StepKey{OrderID: req.OrderID, Step: req.Step}, req.Attempt}] = true
		}
	}
	if w.cfg.ServiceTime > 0 {
		w.clock.Advance(w.cfg.ServiceTime * time.Duration(len(in)))
	}
}

// checkWaited is the rule: a write that counts a failure of a held
// attempt no agent picked up, or of a step no scheduler claimed (handed
// back or stranded, Pending or an undo, and past its pick-up deadline:
// its re-drive waited in a queue, died with its handler, or was lost:
// docs/protocol.md, "A step never claimed has not failed"), failed a step
// by waiting.
func (w *World) checkWaited(name string, b, a sas.StepRecord) {
	if a.FailureCount <= b.FailureCount || a.Attempt != b.Attempt || strings.Contains(a.LastError, "overall limit") {
		return // the step's TotalLimit, which its definition sets: given up by rule, not for waiting
	}
	if b.LockedBy == "" && (b.ProcessState == sas.Pending || b.ProcessState == sas.Compensating) {
		w.violate("failed by waiting", "%s counted failure %d of %v, which no scheduler had claimed since attempt %d: it waited, nothing of it ran",
			name, a.FailureCount, b.Key(), b.Attempt)
		return
	}
	if !b.ProcessState.Leased() || b.LockedBy == "" {
		return
	}
	if w.picked[pickedAttempt{b.Key(), b.Attempt}] {
		return
	}
	if w.isCallback(b.Key()) {
		return // no request: a callback step waits for the outside world, and its deadline is its timeout (callbacks.go)
	}
	w.violate("failed by waiting", "%s counted failure %d of %v attempt %d, whose request no agent had picked up: it waited, it did not fail",
		name, a.FailureCount, b.Key(), b.Attempt)
}

// SabotageRescueUnstarted: the supervisor sees every held step as started
// (its index entries carry StartedAt), so it counts a failure of a step
// whose request is still queued and sends a second one: the fix of
// issue 31 reverted.
const SabotageRescueUnstarted = "rescue-unstarted"

// SabotageCountUnclaimed: the store's re-drive of a step no scheduler
// claimed counts a failure, as the supervisor did before issue 31 held that
// a step never claimed has not failed: a re-drive that waited in a busy
// queue, or died with the scheduler holding it, brings its order nearer a
// give-up.
const SabotageCountUnclaimed = "count-unclaimed"

// sabotageUnclaimed is SabotageCountUnclaimed applied to a Rescue.
func (w *World) sabotageUnclaimed(p sas.RescueParams) sas.RescueParams {
	if w.cfg.Sabotage == SabotageCountUnclaimed && p.Lost && !p.WaitingSince.IsZero() {
		p.Lost, p.WaitingSince = false, time.Time{}
	}
	return p
}

// sabotageStarted is SabotageRescueUnstarted applied to what FindDue shows.
func (w *World) sabotageStarted(res sas.FindDueResult) sas.FindDueResult {
	if w.cfg.Sabotage != SabotageRescueUnstarted {
		return res
	}
	for i, r := range res.Records {
		if r.ProcessState.Leased() && r.LockedBy != "" && r.StartedAt.IsZero() {
			res.Records[i].StartedAt = r.DueAt
		}
	}
	return res
}

// waitsOnItsRedrive reports whether order id (v) is left to an operator: a
// message of its went to a dead-letter queue as a poison message (every
// handler of its last receives was cut: World.poisoned), and its held step
// has no pick-up reported. With deadlines from pick-up (issue 31) the
// supervisor leaves such a step until its request's delivery horizon, since
// it cannot tell a request never sent from one still queued; the message's
// redrive, which its DLQ's alarm asks for, is what re-sends it. Before,
// the supervisor rescued it at its deadline (seed 5255: an intake whose
// renewals' sends failed on every last receive). docs/protocol.md,
// "Dead letters".
func (w *World) waitsOnItsRedrive(id string, v sas.OrderView) bool {
	if !w.poisoned[id] {
		return false
	}
	for _, r := range v.Steps {
		if r.ProcessState.Leased() && r.LockedBy != "" && r.StartedAt.IsZero() {
			w.tracef("%s is left to the operator: a message of its is in a dead-letter queue, and step %d waits on it", id, r.Step)
			return true
		}
	}
	return false
}
