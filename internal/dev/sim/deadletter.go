package sim

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sas-go/sas/internal/scheduler"
)

// The rule "dead-lettered" (docs/simulation.md, "Invariants"): a message
// that reaches a dead-letter queue is a good message the product let go,
// unless it went there as a poison message does.

// SabotageShortWindow: every queue dead-letters a message past 5 receives,
// the construct's setting before issue 31, while the handlers hand a good
// message on from the receives they did (the scheduler's renewal from the
// third, the agents' hand-back from the fourth): three chances and two,
// not eight and seven. With receives that never reach a handler
// (Faults.Unhandled) good messages are dead-lettered, and the rule
// "dead-lettered" names them (TestTheHandOffWindowSurvivesUnhandledReceives).
const SabotageShortWindow = "short-window"

// shortWindowReceives is SabotageShortWindow's redrive policy.
const shortWindowReceives = 5

// deadLetter moves m, received past q's maxReceives, to q's dead-letter
// queue, and holds it to the rule.
func (w *World) deadLetter(q *queue, m *message) {
	m.gone = true
	q.dlq.msgs = append(q.dlq.msgs, m)
	w.deadLettered++
	if m.poison = w.lastHandlersCut(q, m) || renewedOut(m); !m.poison {
		w.violate("dead-lettered", "message %s (%s), sent by %s, went to %s after %d receives (handlers: %s)",
			m.id, describeBody(m.body), m.sender, q.dlq.name, m.receives-1, w.fates(m))
		return
	}
	if chances, want := q.maxReceives-renewFrom(q)+1, handOffChances(q); !renewedOut(m) && chances < want {
		// Cut on every receive it could have been handed on, but those
		// were fewer than the design gives a good message (issue 31).
		w.violate("dead-lettered", "message %s (%s), sent by %s, went to %s with every receive that could hand it on cut, but it had %d such receives, not %d (handlers: %s)",
			m.id, describeBody(m.body), m.sender, q.dlq.name, chances, want, w.fates(m))
		return
	}
	// The order's message is the operator's, in the DLQ to redrive, its
	// alarm raised.
	var h struct {
		OrderID string `json:"orderId"`
	}
	_ = json.Unmarshal([]byte(m.body), &h)
	w.poisoned[h.OrderID] = true
	w.tracef("message %s (%s) went to %s as a poison message: its renewals ran out, or no handler of its last %d receives finished with the hand-off in its power (%s)",
		m.id, describeBody(m.body), q.dlq.name, q.maxReceives-renewFrom(q)+1, w.fates(m))
}

// fates says what became of each receive's handler, for the trace.
func (w *World) fates(m *message) string {
	var parts []string
	for i, r := range m.receipts {
		if r.t == nil {
			parts = append(parts, fmt.Sprintf("r%d never reached a handler", i+1))
			continue
		}
		t, fate := r.t, "running"
		switch {
		case r.lingered():
			fate = "died, having lingered past its hand-off"
		case t.dead.Load():
			fate = "died"
		case t.ended && t.handOffFailed:
			fate = "finished, its hand-off's send failed"
		case t.ended && r.outrun:
			fate = "finished, outrun by a later receive"
		case t.ended:
			fate = "finished"
		case !t.deadline.IsZero() && w.clock.Now().After(t.deadline):
			fate = "timed out"
		}
		parts = append(parts, fmt.Sprintf("r%d task %d %s", i+1, t.id, fate))
	}
	return strings.Join(parts, ", ")
}

// renewFrom is the first receive on which q's consumer hands a good message
// on instead of handling it (the scheduler's renewal, the agents' hand-back
// of a request received more often than their MaxDeliveries).
func renewFrom(q *queue) int {
	if q.consumer == "scheduler" {
		return scheduler.RenewFrom(q.maxReceives)
	}
	return agentMaxDeliveries
}

// handOffChances is how many receives the design gives a good message of
// q's on which a handler can hand it on before its dead-letter queue
// (docs/decisions.md, "Ten receives before a dead letter"): the third to
// the tenth for the scheduler's queues, the fourth to the tenth for an
// agent's. Written here as the design states them, not derived from the
// settings they hold, so that a setting that shrinks them is caught.
func handOffChances(q *queue) int {
	if q.consumer == "scheduler" {
		return 8
	}
	return 7
}

// renewedOut reports whether m is a scheduler's copy renewed as often as
// it may be (scheduler.MaxRenewals): the bound that lets a message no
// handler can process (or, past the renewals, an outage longer than they
// last) reach the dead-letter queue, as designed (docs/protocol.md, "Dead
// letters").
func renewedOut(m *message) bool {
	var r struct {
		N int `json:"sasRenewals"`
	}
	return json.Unmarshal([]byte(m.body), &r) == nil && r.N >= scheduler.MaxRenewals
}

// lastHandlersCut reports whether no receive of m from renewFrom on went to
// a handler that finished with the message in its power: each died,
// outlived its function's timeout (and dies when next resumed), was still
// at work when a duplicate delivery past the last receive took the message
// to the dead-letter queue, had its hand-off's send fail, or was outrun by a
// duplicate delivery (SQS deletes by the latest receipt only, so its
// delete deleted nothing). Those are the receives on which its consumer
// hands a good message on (a renewal, a hand-back); no handler can act on a
// receive it does not finish, hand on what its queue refuses, nor delete
// with a receipt SQS made stale, so such a message goes to the dead-letter
// queue as a poison message does (docs/protocol.md, "Dead letters"). A
// message that got there although one of those handlers finished
// otherwise, or died having lingered past its hand-off (lingered), is a
// good message the product let go.
func (w *World) lastHandlersCut(q *queue, m *message) bool {
	if len(m.receipts) < q.maxReceives {
		return false // a receive without a handler: the simulator's own bug, reported
	}
	for _, r := range m.receipts[renewFrom(q)-1 : q.maxReceives] {
		t := r.t
		if t == nil {
			continue // never reached a handler: cut before it began
		}
		if t.ended && !t.dead.Load() && !t.handOffFailed && !r.outrun || r.lingered() {
			return false
		}
	}
	return true
}

// lingered reports whether r's task died after a call it made past the
// message's hand-off: it had handed the message on and lived through
// another call without deleting it (a renewal deletes the old message at
// once, the call right after its copy's send; an agent's batch of one
// returns right after its reply), so the old message it left was its own
// doing, unless a later receive had made its receipt stale (outrun).
func (r *receive) lingered() bool {
	return r.t != nil && r.t.dead.Load() && r.handedOffAt > 0 && r.t.diedAt-r.handedOffAt > 1 && !r.outrun
}
