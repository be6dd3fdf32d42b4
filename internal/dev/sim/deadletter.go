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
	return r.t.dead.Load() && r.handedOffAt > 0 && r.t.diedAt-r.handedOffAt > 1 && !r.outrun
}
