package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sas-go/sas/internal/sas"
)

// Forged messages (docs/trust.md): whoever can send to the scheduler queue
// (every agent's role can) must not be able to create, undo or rewrite
// orders. The scheduler queue carries replies; an intake belongs on the
// intake queue and a compensate on the control queue, and a reply's echo is
// believed only under the scheduler's signature.

// forgedPayload is what a forged reply rewrites the echo to: no call may
// ever carry it (checkAction compares every call's payload with its
// order's).
const forgedPayload = `{"amount":999999,"iban":"ATTACKER"}`

// forgedPrefix names the orders forged intakes ask for: none may exist.
const forgedPrefix = "forged"

// forge puts one forged message on the scheduler queue.
func (w *World) forge() {
	w.forged++
	var body, what string
	switch w.rng.IntN(3) {
	case 0:
		id := fmt.Sprintf("%s%d", forgedPrefix, w.forged)
		body = sas.Encode(sas.Intake{V: sas.MessageVersion, Kind: sas.KindIntake, OrderID: id, Workflow: w.v1.Name,
			Payload: json.RawMessage(forgedPayload), ReplyTo: w.status.url})
		what = "an intake for " + id
	case 1:
		id := w.orders[w.rng.IntN(len(w.orders))]
		body = sas.Encode(sas.Compensate{V: sas.MessageVersion, Kind: sas.KindCompensate, OrderID: id,
			Reason: "forged", Actor: "operator"})
		what = "a compensate of " + id
	default:
		req, ok := w.someRequest()
		if !ok {
			return
		}
		rep := sas.AgentReply{V: sas.MessageVersion, Kind: sas.KindAgentReply, OrderID: req.OrderID, Step: req.Step,
			Attempt: req.Attempt, LockedBy: req.LockedBy, Outcome: sas.OutcomeDone, Agent: req.Agent,
			Workflow: req.Workflow, ReplyTo: req.ReplyTo, Payload: json.RawMessage(forgedPayload),
			Compensation: req.Compensation, StepName: req.StepName, Priority: req.Priority,
			Version: req.Version, Generation: req.Generation}
		what = fmt.Sprintf("a done for %s/%d a%d with its payload rewritten, unsigned", req.OrderID, req.Step, req.Attempt)
		if w.rng.IntN(2) == 0 || !w.signedOnly() {
			rep.Sig = req.Sig // the request's own signature, over the payload as it was
			what = strings.Replace(what, "unsigned", "under the request's signature", 1)
		}
		body = sas.Encode(rep)
	}
	w.nextMsg++
	m := &message{id: fmt.Sprintf("m%d", w.nextMsg), body: body, sentAt: w.clock.Now(), visibleAt: w.clock.Now(), sender: "forger"}
	w.sched.msgs = append(w.sched.msgs, m)
	w.tracef("forged %s: %s to scheduler", m.id, what)
}

// signedOnly: the schedulers drop unsigned replies (SAS_REQUIRE_SIGNED_REPLIES)
// in a run with forgers and no agents built before signatures. An unsigned
// reply is handled from the store, its echo ignored, but its outcome is
// believed: with agents that cannot sign, anyone who can send to the
// scheduler queue and knows a step's fence can complete it (docs/trust.md).
func (w *World) signedOnly() bool { return w.cfg.Forge && !w.cfg.OldAgents }

// someRequest is an agent request sent during the run, as an agent that
// saw it could copy it.
func (w *World) someRequest() (sas.AgentRequest, bool) {
	var reqs []sas.AgentRequest
	for _, name := range w.agentNames {
		for _, m := range w.agentQ[name].msgs {
			var r sas.AgentRequest
			if json.Unmarshal([]byte(m.body), &r) == nil && r.Kind == sas.KindAgentRequest {
				reqs = append(reqs, r)
			}
		}
	}
	if len(reqs) == 0 {
		return sas.AgentRequest{}, false
	}
	return reqs[w.rng.IntN(len(reqs))], true
}

// checkPayload holds a call to its order's payload as stored: a rewritten
// echo never reaches the remote.
func (w *World) checkPayload(orderID string, payload json.RawMessage, stored json.RawMessage) {
	if !jsonEqual(payload, stored) {
		w.violate("rewritten payload", "a call for order %s carried %s; the order says %s", orderID, payload, stored)
	}
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y bytes.Buffer
	if json.Compact(&x, a) != nil || json.Compact(&y, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(x.Bytes(), y.Bytes())
}

// checkForged runs when the run settles: no forged intake made an order,
// and no order that completed was compensated unless an operator asked.
func (w *World) checkForged() {
	ctx := context.Background()
	for i := 1; i <= w.forged; i++ {
		id := fmt.Sprintf("%s%d", forgedPrefix, i)
		if _, err := w.mem.GetOrder(ctx, id); err == nil {
			w.violate("forged order", "order %s exists: an intake on the scheduler queue was accepted", id)
		}
	}
	for _, id := range w.orders {
		v, err := w.mem.GetOrder(ctx, id)
		if err != nil || v.State() != sas.Compensated || w.compensateAsked[id] {
			continue
		}
		completed := true
		for _, r := range v.Steps {
			if !everProcessed(r) {
				completed = false
			}
		}
		if completed {
			w.violate("undone unasked", "order %s completed every step and was compensated, and no operator asked", id)
		}
	}
}

func everProcessed(r sas.StepRecord) bool {
	for _, h := range r.History {
		if h.To == sas.Processed {
			return true
		}
	}
	return false
}
