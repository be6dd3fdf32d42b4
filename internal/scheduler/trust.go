package scheduler

import (
	"context"
	"errors"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// The scheduler believes only what it wrote itself or what the sender is
// entitled to say (docs/trust.md). This file holds the checks; the handlers
// call them at their top.

// Source is the queue a message came from, which decides what it may ask.
type Source int

const (
	// FromAgents is the scheduler queue, where agents send their replies
	// and hand back requests they could not finish (retry{requeue}). Every
	// agent's role may send there, so nothing on it is believed unless the
	// scheduler signed it.
	FromAgents Source = iota
	// FromIntake is the intake queue: applications' orders, and only them.
	FromIntake
	// FromControl is the control queue, which only the supervisor's role
	// and operators may send to: retries and compensations.
	FromControl
)

func (s Source) String() string {
	switch s {
	case FromIntake:
		return "the intake queue"
	case FromControl:
		return "the control queue"
	}
	return "the scheduler queue"
}

// Origin is where a message came from: its queue and, when the queue
// says, who sent it (SQS's SenderId attribute: the sender's account or
// role session). Tests, the test kit and the local run set it as the
// event source mapping would.
type Origin struct {
	Source    Source
	SenderID  string // SQS attribute SenderId; "" when unknown
	MessageID string
	// Agent, for a message from an agent's own reply queue, is that agent:
	// the only one whose replies, reports and requeues it may carry
	// (docs/trust.md, "A reply queue per agent"). "" for the scheduler
	// queue, which any agent may reply on.
	Agent string
	// Redelivered: SQS delivers this message again (its
	// ApproximateReceiveCount is over 1, or it is a renewed copy): an
	// earlier delivery may have stopped between its write and its sends,
	// so the request of a step it claimed is sent again if no pick-up was
	// reported (resend). A different message about the same order (a
	// duplicate intake, a second reply) is not a redelivery.
	Redelivered bool
	// SentAt is when the message was sent (SQS's SentTimestamp), zero
	// when unknown: how long it waited in its queue, for a late pick-up's
	// report (started.go).
	SentAt time.Time
}

// accepts reports whether a message of kind k may come from src: intake
// from the intake queue only; agent replies from the scheduler queue;
// retries and compensations from the control queue, except the agent's
// requeue, which is a retry on the scheduler queue checked like a reply.
func accepts(src Source, k sas.Kind, requeue bool) bool {
	switch k {
	case "", sas.KindIntake:
		return src == FromIntake
	case sas.KindAgentReply:
		return src == FromAgents
	case sas.KindRetry:
		if requeue {
			return src == FromAgents || src == FromControl
		}
		return src == FromControl
	case sas.KindCompensate:
		return src == FromControl
	case sas.KindCancel:
		return src == FromControl || src == FromIntake // an operator's, or the order's submitter's
	case sas.KindComplete:
		// The token is the completer's right; the queues that take it
		// name who may send one (docs/trust.md, "Completion tokens").
		return src == FromIntake || src == FromControl
	case sas.KindRedrive:
		return src == FromControl
	}
	return false
}

func refuseSource(from Origin, k sas.Kind) error {
	return drop(nil, "%s message from %s (sender %q): only %s takes it, so it does nothing",
		kindName(k), from.Source, from.SenderID, wantSource(k))
}

func kindName(k sas.Kind) string {
	if k == "" {
		return string(sas.KindIntake)
	}
	return string(k)
}

func wantSource(k sas.Kind) string {
	switch k {
	case "", sas.KindIntake:
		return FromIntake.String()
	case sas.KindAgentReply:
		return FromAgents.String()
	case sas.KindComplete:
		return FromIntake.String() + " or " + FromControl.String()
	}
	return FromControl.String()
}

// actor is who an operator's (or the supervisor's) message is recorded as
// coming from: the queue's word for the sender, never a field the sender
// filled in.
func actor(from Origin) string {
	if from.SenderID == "" {
		return "control-queue:unknown-sender"
	}
	return "sender:" + from.SenderID
}

// sign adds the scheduler's signature to a request it sends.
func (s *Service) sign(req *sas.AgentRequest) {
	req.Sig = s.signer.Sign(req.Signed())
}

// trustReply decides what of a reply may be believed. A reply whose
// signature matches its echo is used as it is: the happy path reads
// nothing. A reply with a signature that does not match was rewritten (or
// signed with another key): it is dropped. A reply without a signature (an
// agent built before signatures) is dropped when the deployment requires
// signatures; otherwise its echo is thrown away and replaced by what the
// store holds for its order and step, so that all it contributes is its
// outcome for the attempt and holder it names, fenced as every reply.
func (s *Service) trustReply(ctx context.Context, rep sas.AgentReply) (sas.AgentReply, error) {
	// The agent's reason goes into the record, its history, the alert and
	// the status: cut to a bound, whoever wrote it.
	rep.Reason = sas.BoundReason(rep.Reason)
	err := s.signer.Verify(rep.Signed(), rep.Sig)
	switch {
	case err == nil:
		return s.traced(ctx, rep), nil
	case errors.Is(err, sas.ErrUnsigned) && !s.cfg.RequireSignedReplies:
	case errors.Is(err, sas.ErrUnsigned):
		s.log.WarnContext(ctx, "reply refused: it carries no signature (an agent built before signed requests? rebuild it with the SDK, or set SAS_REQUIRE_SIGNED_REPLIES=false)",
			"order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt, "agent", rep.Agent)
		return rep, drop(err, "unsigned reply for order %s step %d attempt %d", rep.OrderID, rep.Step, rep.Attempt)
	default:
		s.log.WarnContext(ctx, "reply refused: its echo is not what the scheduler sent", "order", rep.OrderID,
			"step", rep.Step, "attempt", rep.Attempt, "agent", rep.Agent, "err", err)
		return rep, drop(err, "reply for order %s step %d attempt %d", rep.OrderID, rep.Step, rep.Attempt)
	}
	o, err := s.load(ctx, rep.OrderID)
	if err != nil {
		return rep, err
	}
	r, ok := o.step(rep.Step)
	if !ok {
		return rep, drop(nil, "unsigned reply for order %s: no step %d", rep.OrderID, rep.Step)
	}
	def := o.wf.Steps[rep.Step]
	s.log.WarnContext(ctx, "unsigned reply: its echo is ignored, the order is read from the store", "order", rep.OrderID,
		"step", rep.Step, "attempt", rep.Attempt, "agent", rep.Agent)
	rep.Workflow, rep.Version, rep.Payload, rep.ReplyTo, rep.Priority = o.ord.Workflow, o.ord.Version, o.ord.Payload, o.ord.ReplyTo, o.ord.Priority
	rep.StepName, rep.Agent = def.Name, def.Agent
	rep.Trace = sas.OrderTrace(rep.Trace, o.ord.Trace)
	switch r.ProcessState {
	case sas.Compensating, sas.Compensated, sas.CompensationFailed:
		rep.Compensation = true
	default:
		rep.Compensation = false
	}
	return rep, nil
}

// traced gives a signed reply that carries no valid trace (from an agent
// built after signatures and before traces, which echoes sig but not trace)
// the order's stored trace, so that what the scheduler sends next stays in
// the order's trace: one GetOrder, paid only for such replies (a current
// agent's reply carries the trace, and the happy path still reads
// nothing). The trace is for people: a read that fails is logged and the
// reply handled without one; the fenced write decides the rest.
func (s *Service) traced(ctx context.Context, rep sas.AgentReply) sas.AgentReply {
	if sas.ValidTrace(rep.Trace) {
		return rep
	}
	v, err := s.cfg.Store.GetOrder(ctx, rep.OrderID)
	if err != nil {
		s.log.WarnContext(ctx, "reply without a trace: the order's could not be read; what follows carries none",
			"order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt, "err", err)
		return rep
	}
	rep.Trace = v.Order.Trace // none for an order stored before traces
	return rep
}

// requeueAuthentic checks that an agent's requeue for the step's current,
// held attempt hands back a request the scheduler sent: its signature must
// be the one of the request the scheduler sends for that attempt and
// holder, rebuilt from the stored order by the function that built it
// (Service.request), so every signed field is covered, the generation
// included (issue 29, N1). A requeue for any other attempt is stale and is
// dropped by the handler whatever its signature.
//
// From an agent's own reply queue (queueAgent), the request must also be
// that agent's (fromItsAgent).
func (s *Service) requeueAuthentic(o order, rec sas.StepRecord, m sas.Retry, queueAgent string) error {
	if !rec.ProcessState.Leased() || rec.LockedBy == "" || rec.Attempt != m.Attempt {
		return nil // not the current attempt: the handler drops it as stale
	}
	if sas.StepOf(rec.Step) >= o.n() {
		return drop(nil, "requeue for order %s: no step %d", m.OrderID, m.Step)
	}
	want := s.request(o.ord, o.def(rec.Step), rec)
	if err := s.signer.Verify(want.Signed(), m.Sig); err != nil {
		return drop(err, "requeue for order %s step %d attempt %d is not a request the scheduler sent", m.OrderID, m.Step, m.Attempt)
	}
	return fromItsAgent(queueAgent, want.Agent, "requeue", "")
}

// fromItsAgent refuses a message from an agent's own reply queue that
// speaks for another agent (docs/trust.md, "A reply queue per agent"): the
// queue's policy admits that agent's role alone, so a role can answer only
// for its own steps, even with another agent's request (and signature) in
// hand. The agent a message names is signed, so it cannot be changed to
// pass. A message from the scheduler queue (queueAgent "") is not checked.
func fromItsAgent(queueAgent, agent, what, sender string) error {
	if queueAgent == "" || agent == queueAgent {
		return nil
	}
	return drop(nil, "%s for agent %q on agent %q's reply queue (sender %s): an agent's queue carries its own replies only", what, agent, queueAgent, sender)
}
