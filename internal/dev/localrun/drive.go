package localrun

import (
	"github.com/sas-go/sas/internal/dev/poller"

	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/internal/sas"
)

// Submit sends intake messages in batches of ten, as an application would.
func (s *System) Submit(ctx context.Context, intakes ...sas.Intake) error {
	msgs := make([]sas.OutboundMessage, len(intakes))
	for i, in := range intakes {
		msgs[i] = sas.OutboundMessage{ID: fmt.Sprintf("m%d", i), Body: sas.Encode(in)}
	}
	return s.SendRaw(ctx, s.Config.IntakeQueueURL, msgs...)
}

// SendRaw sends bodies as they are (for malformed input tests).
func (s *System) SendRaw(ctx context.Context, url string, msgs ...sas.OutboundMessage) error {
	res, err := s.Queue.Send(ctx, sas.SendParams{QueueURL: url, Messages: msgs})
	if err != nil {
		return err
	}
	if len(res.Failed) > 0 {
		return fmt.Errorf("sending %d messages: %d failed, first: %s %s", len(msgs), len(res.Failed), res.Failed[0].Code, res.Failed[0].Message)
	}
	return nil
}

// Invoke runs a handler on a hand-built event (for tests of duplicate
// deliveries).
func Invoke(ctx context.Context, h poller.SQSHandler, bodies ...string) (events.SQSEventResponse, error) {
	ev := events.SQSEvent{}
	for i, b := range bodies {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("hand-%d", i), Body: b, EventSource: "aws:sqs"})
	}
	return h(ctx, ev)
}

// Redeliver is Invoke with every record marked as SQS marks a message it
// delivers again after its visibility timeout (ApproximateReceiveCount 2):
// what a scheduler or agent that died while handling a message leaves
// behind (docs/protocol.md, "Deadlines start at pick-up": a held step's
// request is sent again only on a redelivery of the message that caused it).
func Redeliver(ctx context.Context, h poller.SQSHandler, bodies ...string) (events.SQSEventResponse, error) {
	ev := events.SQSEvent{}
	for i, b := range bodies {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("hand-%d", i), Body: b, EventSource: "aws:sqs",
			Attributes: map[string]string{"ApproximateReceiveCount": "2"}})
	}
	return h(ctx, ev)
}

// ByKind wraps a scheduler's handler for messages handed to it directly
// (Invoke) rather than received by a poller: each record without a source
// is given the queue its kind belongs to (an intake the intake queue, a
// retry or compensation the control queue, anything else the scheduler
// queue), as if it had arrived there (docs/trust.md).
func (s *System) ByKind(h poller.SQSHandler) poller.SQSHandler {
	arn := func(url string) string { return sas.LocalQueueARN("us-east-1", url) }
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		for i, r := range ev.Records {
			if r.EventSourceARN != "" {
				continue
			}
			h, _ := sas.DecodeHeader([]byte(r.Body))
			switch h.Kind {
			case "", sas.KindIntake:
				ev.Records[i].EventSourceARN = arn(s.Config.IntakeQueueURL)
			case sas.KindRetry, sas.KindCompensate:
				ev.Records[i].EventSourceARN = arn(s.Config.ControlQueueURL)
			default:
				ev.Records[i].EventSourceARN = arn(s.Config.SchedulerQueueURL)
			}
		}
		return h(ctx, ev)
	}
}
