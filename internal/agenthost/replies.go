package agenthost

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
)

// maxReplyBatch is SQS's limit of entries per SendMessageBatch.
const maxReplyBatch = 10

// result is how one request of a batch ended.
type result struct {
	index int
	out   *outgoing // the reply to send; nil: nothing to send
	fate  fate      // of the message when out is nil; a sent reply acknowledges it
}

// outgoing is a reply ready to be sent.
type outgoing struct {
	index    int
	reply    sas.AgentReply
	req      sas.AgentRequest
	log      *slog.Logger
	start    time.Time
	deadline time.Time // the agent's, Deadline(req, start)
}

// collect takes the results of one invocation as they come and sends the
// replies in batches: a ready reply waits at most the linger for others.
// It returns when every request has ended and every reply was sent (or
// marked in failed). The messages of redelivered requests whose replies
// went out are deleted at once (retireAnswered).
func (s *Service) collect(ctx context.Context, records []events.SQSMessage, results <-chan result, failed []fate) {
	var pending []outgoing
	var timer *time.Timer
	var linger <-chan time.Time
	flush := func() {
		if timer != nil {
			timer.Stop()
			timer, linger = nil, nil
		}
		s.retireAnswered(ctx, records, s.sendReplies(ctx, pending, failed))
		pending = nil
	}
	for {
		select {
		case r, open := <-results:
			if !open {
				if len(pending) > 0 {
					flush()
				}
				return
			}
			switch {
			case r.out == nil:
				failed[r.index] = r.fate
			default:
				pending = append(pending, *r.out)
				if len(pending) == maxReplyBatch {
					flush()
				} else if timer == nil {
					timer = time.NewTimer(s.linger)
					linger = timer.C
				}
			}
		case <-linger:
			flush()
		}
	}
}

// sendReplies sends ready replies in one Send (a SendMessageBatch for more
// than one), holding back any whose deadline passed while it waited (their
// messages are left for redelivery, as for no outcome). It returns the
// indexes of the records whose replies went out.
func (s *Service) sendReplies(ctx context.Context, pending []outgoing, failed []fate) (sent []int) {
	var batch []outgoing
	now := s.clock.Now()
	for _, o := range pending {
		if o.reply.Outcome != sas.OutcomeTransient && s.late(o.log, o.reply, o.deadline, now) {
			failed[o.index] = redeliverSoon
			continue
		}
		batch = append(batch, o)
	}
	if len(batch) == 0 {
		return nil
	}
	// The one place per-entry send failures are mapped back (internal/outbox):
	// the linger above decides when, outbox.Send how.
	msgs := make([]outbox.Message, len(batch))
	for i, o := range batch {
		msgs[i] = outbox.Message{QueueURL: s.replyURL, Body: sas.Encode(o.reply), What: fmt.Sprintf("agent.reply for %s step %d", o.reply.OrderID, o.reply.Step)}
	}
	errs := outbox.Send(ctx, s.queue, s.replyURL, msgs)
	for i, o := range batch {
		took := s.clock.Now().Sub(o.start).String()
		switch err := errs[i]; {
		case err != nil:
			o.log.Error("agent: reply not sent; message left for redelivery", "outcome", o.reply.Outcome, "err", err.Error())
			failed[o.index] = redeliver
		case o.reply.Outcome == sas.OutcomeFailed:
			o.log.Warn("agent: replied failed", "outcome", o.reply.Outcome, "reason", o.reply.Reason, "took", took)
		case o.reply.Outcome == sas.OutcomeTransient:
			o.log.Warn("agent: replied transient: the attempt failed", "outcome", o.reply.Outcome, "errorType", o.reply.ErrorType, "reason", o.reply.Reason, "took", took)
		default:
			o.log.Info("agent: replied done", "outcome", o.reply.Outcome, "took", took)
		}
		if errs[i] == nil {
			sent = append(sent, o.index)
		}
	}
	return sent
}

// retireAnswered deletes at once the messages of the redelivered requests
// (a receive count over 1) whose replies went out, one DeleteMessageBatch
// per queue, rather than when the invocation returns: a batch waits for its
// slowest request (a call that hangs runs to its deadline), and an
// instance that dies meanwhile left its answered requests for redelivery,
// together. Issue 31: six requests of one batch, five answered within a
// tenth of a second and one hung, were received together five times, each
// batch cut by a kill, and all six were dead-lettered. A first delivery is
// left to the event source, so the happy path costs what it did
// (TestCostPerOrder); a redelivery is already off it. A delete that fails
// is left to the event source too.
func (s *Service) retireAnswered(ctx context.Context, records []events.SQSMessage, sent []int) {
	var answered []events.SQSMessage
	for _, i := range sent {
		if receives(records[i]) > 1 {
			answered = append(answered, records[i])
		}
	}
	s.retire(ctx, answered...)
}

// late reports (and logs) an outcome that came at or after the agent's
// deadline for the request (Deadline). The pattern's agent stops at the
// deadline and says nothing (docs/pattern.md §2). The work is not lost: the
// message is left for redelivery, whose call sends the same key and gets the
// stored answer (docs/protocol.md, "Agent").
func (s *Service) late(log *slog.Logger, reply sas.AgentReply, deadline, now time.Time) bool {
	if now.Before(deadline) {
		return false
	}
	log.Warn("agent: outcome came after the deadline; no reply, left for redelivery",
		"outcome", reply.Outcome, "reason", reply.Reason, "deadline", deadline, "lateBy", now.Sub(deadline).String())
	return true
}

// carriedResult is the result a done reply carries, compacted, and the
// reason its step fails instead when it is over sas.MaxResultBytes ("" when
// within; docs/protocol.md, "Results"). Nothing is dropped silently: the
// scheduler records every result it receives, and a step whose result
// cannot be carried fails by name (sas.ErrorResultTooLarge), its effect
// undone with its order.
func carriedResult(log *slog.Logger, step string, result json.RawMessage) (json.RawMessage, string) {
	if len(result) == 0 {
		return nil, ""
	}
	res, err := sas.CompactResult(result)
	if err != nil {
		res = result // resultOf made it JSON; a runner's raw bytes are counted as they are
	}
	if why := sas.ResultTooLarge(step, len(res)); why != "" {
		log.Warn("agent: result over its bound; the step fails", "resultBytes", len(res), "limit", sas.MaxResultBytes)
		return nil, why
	}
	return res, ""
}

// resultOf makes a success body a valid reply result: empty is no result,
// JSON passes through, anything else is carried as a JSON string so the
// scheduler still sees what the service said.
func resultOf(body []byte) json.RawMessage {
	s := strings.TrimSpace(string(body))
	switch {
	case s == "":
		return nil
	case json.Valid([]byte(s)):
		return json.RawMessage(s)
	}
	b, _ := sas.Marshal(s) // a string always encodes
	return b
}

// replyTo starts the reply to req. Besides the fence (order, step, attempt,
// holder) it echoes the order's workflow, replyTo, payload, undo flag and step
// name verbatim, so the scheduler can advance the order without reading it.
// The agent never interprets them: they are the scheduler's routing hints, and
// a request from an older scheduler that lacks them gets a reply that lacks
// them too (the scheduler then reads the order).
func replyTo(req sas.AgentRequest) sas.AgentReply {
	return sas.AgentReply{
		// The request's trace, a span of its own: one order, one trace.
		Trace: sas.ChildTrace(req.Trace, fmt.Sprintf("%s %s %d", sas.KindAgentReply, req.IdempotencyKey, req.Attempt)),
		V:     sas.MessageVersion, Kind: sas.KindAgentReply, OrderID: req.OrderID, Step: req.Step,
		Attempt: req.Attempt, LockedBy: req.LockedBy, Agent: req.Agent,
		Workflow: req.Workflow, ReplyTo: req.ReplyTo, Payload: req.Payload,
		Compensation: req.Compensation, StepName: req.StepName,
		Priority: req.Priority, Version: req.Version, Generation: req.Generation,
		Sig: req.Sig, // the scheduler's signature over the echo, unread (docs/trust.md)
	}
}
