package sim

import (
	"encoding/json"
	"fmt"

	"github.com/sas-go/sas/internal/sas"
)

// The operator's redrive (docs/protocol.md, "Redrives"; docs/simulation.md,
// "The operator"). A poison message's order is the operator's while its
// message waits in a dead-letter queue (waitsOnItsRedrive); once the run is
// calm and nothing else can move, the operator answers the DLQ's alarm and
// redrives it as the console does, and from then on the order is held to
// the rule "no progress" like any other: a redriven dead letter must finish
// its order.

// SabotageRedriveAsNew plants the console's old redrive: a dead letter of a
// queue the scheduler reads goes back to its own queue as it is, a new
// message, which the scheduler takes for a duplicate and which so re-sends
// nothing: the order's held step waits for its request's delivery horizon
// (caught as "no progress").
const SabotageRedriveAsNew = "redrive-as-new"

// redriveDeadLetters moves every dead letter back, as the console's redrive
// does: one of a queue the scheduler reads through the control queue,
// inside a redrive message naming its queue, id and sender; an agent
// queue's back to its queue as it is. The orders they belong to are the
// operator's no more. It reports whether it moved anything.
func (w *World) redriveDeadLetters() bool {
	moved := false
	now := w.clock.Now()
	for _, q := range w.queues {
		if q.dlq == nil {
			continue
		}
		for _, m := range q.dlq.msgs {
			if m.redriven {
				continue
			}
			m.redriven, moved = true, true
			to, body := q, m.body
			if q.consumer == "scheduler" && w.cfg.Sabotage != SabotageRedriveAsNew {
				to = w.control
				body = sas.Encode(sas.Redrive{V: sas.MessageVersion, Kind: sas.KindRedrive, Queue: q.name, Body: m.body,
					MessageID: m.id, Actor: "operator:sim"})
			}
			w.nextMsg++
			msg := &message{id: fmt.Sprintf("m%d", w.nextMsg), body: body, sentAt: now, visibleAt: now, sender: "operator"}
			to.msgs = append(to.msgs, msg)
			w.redriven++
			var h struct {
				OrderID string `json:"orderId"`
			}
			_ = json.Unmarshal([]byte(m.body), &h)
			delete(w.poisoned, h.OrderID)
			w.tracef("operator: redrove %s (%s) from %s to %s as %s", m.id, describeBody(m.body), q.dlq.name, to.name, msg.id)
		}
	}
	return moved
}
