package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/internal/msgctx"
	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sqsevent"
)

// HandleMessage routes one message body by its kind, as it would a
// record from the queue from names. What a message may ask depends on where
// it came from (trust.go): an intake is taken only from the intake queue,
// a reply only from the scheduler queue, a retry or compensation only from
// the control queue. Intake messages may omit the kind; so may a body that
// is not even JSON, which is then reported as a malformed intake (with a
// rejection where possible).
func (s *Service) HandleMessage(ctx context.Context, from Origin, body []byte) error {
	return s.run(ctx, func(u *outbox.Unit) error { return s.handleMessage(ctx, u, from, body) })
}

func (s *Service) handleMessage(ctx context.Context, u *outbox.Unit, from Origin, body []byte) error {
	ctx = msgctx.WithMessage(ctx, from.MessageID) // every line below names it
	ctx = withRedelivery(ctx, from.Redelivered)
	ctx = withSentAt(ctx, from.SentAt)
	if err := s.signer.Refresh(ctx); err != nil {
		// The keys read before are kept: a rotation waits, nothing stops.
		s.log.WarnContext(ctx, "signing keys not re-read", "err", err)
	}
	h, herr := sas.DecodeHeader(body)
	if from.Source == FromIntake {
		switch {
		case herr == nil && h.Kind == sas.KindCancel:
			return s.cancelMessage(ctx, u, from, body) // the submitter cancels its own order
		case herr == nil && h.Kind == sas.KindComplete:
			// The outside world completing a waiting step: its token,
			// not the queue, says which (callback.go).
			return s.completion(ctx, u, from, body)
		}
		// Whatever kind it claims: an application that may write orders
		// cannot also send replies, retries or compensation requests.
		// ParseIntake reports the header's problems too, with a reason.
		return s.intake(ctx, u, body, from)
	}
	switch h.Kind {
	case "", sas.KindIntake:
		return refuseSource(from, h.Kind) // nothing is created, nobody is told
	case sas.KindComplete:
		if from.Source != FromControl {
			return refuseSource(from, h.Kind)
		}
		return s.completion(ctx, u, from, body)
	case sas.KindRedrive:
		return s.redriven(ctx, u, from, body) // redrive.go
	case sas.KindAgentReply, sas.KindRetry, sas.KindCompensate, sas.KindCancel:
	default:
		return drop(herr, "kind %q is not a message for the scheduler", h.Kind)
	}
	if herr != nil {
		return drop(herr, "%s message", h.Kind)
	}
	if h.Kind != sas.KindRetry && !accepts(from.Source, h.Kind, false) {
		return refuseSource(from, h.Kind)
	}
	switch h.Kind {
	case sas.KindAgentReply:
		var m sas.AgentReply
		if err := json.Unmarshal(body, &m); err != nil {
			return drop(err, "malformed agent reply")
		}
		ctx = msgctx.WithTrace(ctx, m.Trace)
		if err := fromItsAgent(from.Agent, m.Agent, "reply", from.SenderID); err != nil {
			return err
		}
		return s.reply(ctx, u, m)
	case sas.KindCancel:
		return s.cancelMessage(ctx, u, from, body)
	case sas.KindRetry:
		var m sas.Retry
		if err := json.Unmarshal(body, &m); err != nil {
			return drop(err, "malformed retry message")
		}
		ctx = msgctx.WithTrace(ctx, m.Trace)
		if !accepts(from.Source, h.Kind, m.Requeue) {
			return refuseSource(from, h.Kind)
		}
		return s.retry(ctx, u, m, from.Agent)
	default:
		var m sas.Compensate
		if err := json.Unmarshal(body, &m); err != nil {
			return drop(err, "malformed compensate message")
		}
		ctx = msgctx.WithTrace(ctx, m.Trace)
		// Who asked is who sent it, not what the message says.
		s.log.InfoContext(ctx, "compensate message", "order", m.OrderID, "sender", from.SenderID, "declaredActor", m.Actor)
		m.Actor = actor(from)
		return s.compensate(ctx, u, m)
	}
}

// Handler is the scheduler's Lambda handler for SQS events (the intake queue
// and the scheduler queue), with partial batch failures.
type Handler struct {
	svc     *Service
	log     *slog.Logger
	intake  string // the intake queue's name; "" when not configured
	control string // the control queue's name; "" when not configured
	// urls are the queues whose messages are renewed on their last
	// receive, by name (renew.go).
	urls map[string]string
	// replies maps each agent's own reply queue, by name, to its agent
	// (docs/trust.md, "A reply queue per agent").
	replies map[string]string
}

// NewHandler returns the Lambda handler of a Service.
func NewHandler(svc *Service) *Handler {
	urls := map[string]string{}
	// The control queue's too: a retry or compensate failing through a
	// store outage is as good as any other message (issue 29, N6).
	for _, u := range []string{svc.cfg.IntakeQueueURL, svc.cfg.SchedulerQueueURL, svc.cfg.ControlQueueURL} {
		if u != "" {
			urls[sas.QueueName(u)] = u
		}
	}
	replies := map[string]string{}
	for agent, q := range svc.cfg.AgentQueues.ByAgent {
		if q.RepliesURL != "" {
			urls[sas.QueueName(q.RepliesURL)] = q.RepliesURL // renewed into itself
			replies[sas.QueueName(q.RepliesURL)] = agent
		}
	}
	return &Handler{svc: svc, log: svc.log, intake: sas.QueueName(svc.cfg.IntakeQueueURL), control: sas.QueueName(svc.cfg.ControlQueueURL),
		urls: urls, replies: replies}
}

// origin tells which queue a record came from by its eventSourceARN, and
// who sent it by its SenderId attribute.
func (h *Handler) origin(rec events.SQSMessage) Origin {
	o := Origin{Source: FromAgents, SenderID: rec.Attributes["SenderId"], MessageID: rec.MessageId, SentAt: sqsevent.SentAt(rec)}
	switch name := sas.QueueName(rec.EventSourceARN); {
	case name == "":
	case name == h.intake:
		o.Source = FromIntake
	case name == h.control:
		o.Source = FromControl
	default:
		o.Agent = h.replies[name]
	}
	return o
}

// Handle processes each record on its own. A record whose message can never
// succeed (malformed, invalid, stale) is logged and acknowledged; only
// transient failures (store, queue, alerter) are reported, so SQS redelivers
// just those. The failure list is never nil: a null batchItemFailures makes
// some pollers redeliver the whole batch forever (docs/pattern.md §7).
//
// The effects the records decide on (agent requests, statuses, alerts) are
// added to one outbox.Batch and sent together after the last record,
// batched per queue: one request for up to ten messages instead of one
// each. A record whose effects did not all go out is redelivered (or
// dropped, when no retry can help), and its redelivery repeats them.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var box outbox.Batch
	failed := make([]bool, len(ev.Records))
	// The records on one of their last receives are renewed first, before
	// any record is handled: a batch that its instance's death or its
	// timeout cuts while it handles the others must not take their last
	// receives with it (docs/protocol.md, "Dead letters").
	renewed := make([]bool, len(ev.Records))
	for i, rec := range ev.Records {
		renewed[i] = ctx.Err() == nil && h.renew(msgctx.WithMessage(ctx, rec.MessageId), rec)
	}
	for i, rec := range ev.Records {
		if renewed[i] {
			continue
		}
		if err := h.handleRecord(ctx, box.Unit(i), rec); err != nil {
			failed[i] = true
		}
	}
	for _, f := range box.Flush(ctx, h.svc.sink()) {
		log := h.log.With("messageId", ev.Records[f.Unit].MessageId)
		if h.settle(ctx, log, f.Err) != nil {
			failed[f.Unit] = true
		}
	}
	failures := []events.SQSBatchItemFailure{}
	for i, f := range failed {
		if f {
			failures = append(failures, events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
		}
	}
	return events.SQSEventResponse{BatchItemFailures: failures}, nil
}

// handleRecord returns an error only for a record SQS should redeliver.
func (h *Handler) handleRecord(ctx context.Context, u *outbox.Unit, rec events.SQSMessage) (err error) {
	// The message's id is in the context of every line about it
	// (internal/msgctx), from here down to the service's.
	ctx = msgctx.WithMessage(ctx, rec.MessageId)
	log := h.log
	defer func() {
		// A bug in one message must not take down the others in the batch.
		if p := recover(); p != nil {
			log.ErrorContext(ctx, "panic handling message; it will be redelivered", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	if err := ctx.Err(); err != nil {
		// Out of time: leave the rest for redelivery rather than half-do it.
		return fmt.Errorf("not handled: %w", err)
	}
	was, body := h.svc.renewals(rec.Body)
	from := h.origin(rec)
	if was.sender != "" {
		// A copy the scheduler renewed: who sent the message first, as
		// the scheduler signed it (renew.go), not the scheduler itself.
		from.SenderID = was.sender
	}
	from.Redelivered = redelivery(rec) || was.count > 0
	return h.settle(ctx, log, h.svc.handleMessage(ctx, u, from, []byte(body)))
}

// settle logs how a record ended and returns its error only when SQS should
// redeliver it.
func (h *Handler) settle(ctx context.Context, log *slog.Logger, err error) error {
	var dropped *DropError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &dropped):
		log.WarnContext(ctx, "message dropped", "reason", err.Error())
		return nil
	case errors.Is(err, sas.ErrInvalid):
		// Nothing invalid becomes valid on a retry.
		log.ErrorContext(ctx, "message dropped: invalid", "err", err)
		return nil
	}
	log.ErrorContext(ctx, "message failed; it will be redelivered", "err", err)
	return err
}
