package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/sas"
)

// Agent-issued tokens and operators' completions by name (issue 28 §1 and
// §7; docs/protocol.md, "Agent-issued tokens"; docs/simulation.md).
//
// In half the callback seeds (Config.agentToken) the approve step has an
// agent too: its request carries the step's token, the agent asks the
// remote to confirm, and the remote (the outside system) learns the token
// from that call once its effect is made (learnToken): the outside world
// answers it as it answers a waiting status's token (callbacks.go). The
// agent's answer completes nothing; its permanent failure fails the step,
// whose undo is owed.
//
// An operator completes, fails or heartbeats callback steps by name
// (operatorNamed: a complete message whose step names the attempt, as the
// console's approvals and `sasctl complete -order -step` send): on the
// control queue mostly, the waiting attempt or another attempt,
// generation or holder, or a step no longer waiting; and, as an
// application with only the intake's rights would, on the intake queue,
// which must change nothing.
//
// "token misused" holds both: a write that completes, fails or heartbeats
// a callback step's attempt comes from a message carrying that attempt's
// token, or from an operator's message on the control queue naming that
// very attempt (namedBy), or, for a failure, from the agent's own failed
// answer of that attempt (agentFailed).

// Planted bugs of these paths (TestChecksCatchPlantedBugs).
const (
	// SabotageAgentCompletes: the agent's done answer of a callback step
	// with an agent is taken for its completion: the world hands the
	// scheduler, on the control queue, a completion naming the step from
	// that answer (as a scheduler that completed the step on its agent's
	// answer would).
	SabotageAgentCompletes = "agent-completes"
	// SabotageNamedFromIntake: a completion naming its step without a
	// token, sent to the intake queue, is believed: the world delivers it
	// through the control queue (as a scheduler that believed it from
	// the intake would).
	SabotageNamedFromIntake = "named-from-intake"
)

// Names the world's messages carry (message.sender) on these paths.
const (
	senderOperator = "operator"
	senderOutside  = "outside"
	senderAgent    = "agent"
)

// agentToken reports whether this run's callback step has an agent: in its
// planted bug's seeds, and in half the callback seeds besides.
func (c Config) agentToken() bool {
	return c.Sabotage == SabotageAgentCompletes || splitmix(uint64(c.Seed)^0xa9e7)%2 == 0
}

// withAgentToken gives the approve step an agent: the pay agent confirms
// the trip with the remote, and voids the confirmation as its undo.
//
// Seeds with a wait step or branches once gave it no undo: there a step
// with no undo (the wait, a branch's) may complete before approve fails,
// and an order whose failed step's own undo ran while such a step stays
// Processed read Processing forever from its records alone (seeds 284,
// 776, 1092). The checks read each order with its definition now
// (World.view), as the console and the test kit do, which says which
// steps have an undo (docs/simulation.md, "Bugs found").
func withAgentToken(w sas.Workflow) sas.Workflow {
	steps := append([]sas.StepDef(nil), w.Steps...)
	for i, s := range steps {
		if s.Name == "approve" {
			s.Agent, s.Action, s.Undo, s.Timeout = "pay", "confirm", "void", stepTimeout
			steps[i] = s
		}
	}
	return sas.Workflow{Name: w.Name, Steps: steps}
}

// learnToken is the remote learning a step's token from its agent's call
// (agent.Request.Token), once the call's effect is made: the outside
// world holds it from then on.
func (r *remote) learnToken(req agent.Request) {
	if req.Token == "" || req.Undo {
		return
	}
	c := r.w.cbs()
	if !c.seen[req.Token] {
		c.seen[req.Token] = true
		c.tokens = append(c.tokens, req.Token)
		r.w.tracef("  remote: holds the token of %s attempt %d", req.IdempotencyKey, req.Attempt)
	}
}

// isAgentToken reports whether k is a callback step with an agent.
func (w *World) isAgentToken(k sas.StepKey) bool {
	def, ok := w.stepDef(k)
	return ok && def.AgentToken()
}

// operatorNamed is one completion by name, drawn from the seed: an
// operator's on the control queue (the waiting attempt, mostly; another
// attempt, generation or holder; a step no longer waiting), or one on the
// intake queue, which must change nothing.
func (w *World) operatorNamed() {
	c := w.cbs()
	tok, err := sas.PeekToken(c.tokens[w.rng.IntN(len(c.tokens))])
	if err != nil {
		return
	}
	k := sas.StepKey{OrderID: tok.OrderID, Step: tok.Step}
	r, err := w.mem.GetStep(context.Background(), k)
	if err != nil {
		return
	}
	ws := sas.WaitingStepOf(r)
	what := "the step as it reads"
	if r.LockedBy == "" {
		ws.Holder = tok.Holder // a step no longer held: its last holder
	}
	switch x := w.rng.IntN(10); {
	case x == 0:
		ws.Attempt, what = ws.Attempt+1, "another attempt"
	case x == 1:
		ws.Generation, what = ws.Generation+1, "another generation"
	case x == 2:
		ws.Holder, what = "scheduler-elsewhere", "another holder"
	}
	m := sas.Completion{V: sas.MessageVersion, Kind: sas.KindComplete, Step: &ws, Actor: "console:sim"}
	switch x := w.rng.IntN(10); {
	case x < 6 && (!w.isAgentToken(k) || w.effectMade(k, r.Generation)):
		// An operator approves what they see done: an agent-token
		// step's confirmation made at the remote.
		m.Outcome, m.Result = sas.OutcomeDone, json.RawMessage(`{"approvedBy":"operator"}`)
	case x < 8:
		m.Outcome, m.Reason, m.Rejected = sas.OutcomeFailed, "declined by the operator", x == 7
	default:
		m.Outcome = sas.OutcomeHeartbeat
	}
	name := fmt.Sprintf("%s %s of %v a%d (%s)", m.Outcome, what, k, ws.Attempt, r.ProcessState)
	if w.rng.IntN(4) == 0 {
		to, how := w.intake, "to intake"
		if w.cfg.Sabotage == SabotageNamedFromIntake {
			to, how = w.control, "to intake, believed as from control"
		}
		w.putMessage(to, sas.Encode(m), senderOutside, "an application names "+name+" "+how)
		return
	}
	w.putMessage(w.control, sas.Encode(m), senderOperator, "operator: names "+name)
}

// effectMade reports whether the do of step k's generation took effect at
// the remote and stands.
func (w *World) effectMade(k sas.StepKey, generation int) bool {
	e := w.remote.effects[sas.IdempotencyKey(k.OrderID, k.Step, generation, false)]
	return e != nil && e.done && !e.undone
}

// putMessage puts body on q as sent by sender, now.
func (w *World) putMessage(q *queue, body, sender, what string) {
	w.nextMsg++
	m := &message{id: fmt.Sprintf("m%d", w.nextMsg), body: body, sentAt: w.clock.Now(), visibleAt: w.clock.Now(), sender: sender}
	q.msgs = append(q.msgs, m)
	w.tracef("%s (%s to %s)", what, m.id, q.name)
}

// agentCompletes is SabotageAgentCompletes on a message an agent sent: its
// done answer of an agent-token step goes to the control queue as a
// completion naming that attempt.
func (w *World) agentCompletes(q *queue, m *message) {
	if w.cfg.Sabotage != SabotageAgentCompletes || q != w.sched || !strings.Contains(m.body, `"kind":"agent.reply"`) {
		return
	}
	var rep sas.AgentReply
	if json.Unmarshal([]byte(m.body), &rep) != nil || rep.Outcome != sas.OutcomeDone || rep.Compensation {
		return
	}
	k := sas.StepKey{OrderID: rep.OrderID, Step: rep.Step}
	if !w.isAgentToken(k) {
		return
	}
	ws := sas.WaitingStep{OrderID: rep.OrderID, Step: rep.Step, Attempt: rep.Attempt, Generation: rep.Generation, Holder: rep.LockedBy}
	c := sas.Completion{V: sas.MessageVersion, Kind: sas.KindComplete, Step: &ws, Outcome: sas.OutcomeDone, Result: rep.Result}
	w.putMessage(w.control, sas.Encode(c), senderAgent, fmt.Sprintf("sabotaged: the agent's answer of %v a%d taken for its completion", k, rep.Attempt))
}

// namedBy reports whether a message the task received is an operator's
// completion on the control queue naming attempt a of the step, held by
// holder (or such a message redriven from the control queue's dead
// letters).
func (w *World) namedBy(t *task, a callbackAttempt, holder string) bool {
	for _, x := range t.received {
		body, sender := x.m.body, x.m.sender
		var rd sas.Redrive
		if json.Unmarshal([]byte(body), &rd) == nil && rd.Kind == sas.KindRedrive {
			if rd.Queue != sas.RedriveControl {
				continue
			}
			orig := w.controlDeadLetter(rd.MessageID)
			if orig == nil {
				continue
			}
			body, sender = orig.body, orig.sender
		}
		var c sas.Completion
		if sender != senderOperator || json.Unmarshal([]byte(body), &c) != nil || c.Kind != sas.KindComplete || c.Step == nil {
			continue
		}
		if s := c.Step; s.OrderID == a.key.OrderID && s.Step == a.key.Step && s.Attempt == a.attempt &&
			s.Generation == a.generation && s.Holder == holder {
			return true
		}
	}
	return false
}

// controlDeadLetter is the message of the control queue's dead letters whose id
// is id, or nil.
func (w *World) controlDeadLetter(id string) *message {
	if w.control.dlq == nil {
		return nil
	}
	for _, m := range w.control.dlq.msgs {
		if m.id == id {
			return m
		}
	}
	return nil
}

// agentFailed reports whether a message the task received is the agent's
// failed answer of attempt a of an agent-token step, held by holder: its
// agent's failure ends the step's wait.
func (w *World) agentFailed(t *task, a callbackAttempt, holder string) bool {
	if !w.isAgentToken(a.key) {
		return false
	}
	for _, x := range t.received {
		var rep sas.AgentReply
		if json.Unmarshal([]byte(x.m.body), &rep) != nil || rep.Kind != sas.KindAgentReply {
			continue
		}
		if rep.OrderID == a.key.OrderID && rep.Step == a.key.Step && rep.Attempt == a.attempt && rep.LockedBy == holder &&
			rep.Outcome == sas.OutcomeFailed && !rep.Compensation {
			return true
		}
	}
	return false
}
