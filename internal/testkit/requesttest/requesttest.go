// Package requesttest builds the agent requests, and the SQS events that
// carry them, that the agent SDK's tests and the agent host's tests hand to
// a handler: one builder for both, so that a field the scheduler adds to
// its requests is added here once.
package requesttest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
)

// Option changes a request as built (an alias, so that a test's own
// func(*sas.AgentRequest) values pass as they are).
type Option = func(*sas.AgentRequest)

// Request is a valid agent.request for orderID, as the scheduler sends it
// at clocktest.T0 to agent for its step 0 named step: the first attempt,
// with a 30 s limit, leased until T0+30s, and a small JSON payload. The
// options apply in order, after the defaults.
func Request(agent, step, orderID string, opts ...Option) sas.AgentRequest {
	req := sas.AgentRequest{
		V: sas.MessageVersion, Kind: sas.KindAgentRequest,
		OrderID: orderID, Step: 0, StepName: step, Agent: agent,
		Attempt: 1, LockedBy: "scheduler-a", CompleteBy: clocktest.T0.Add(30 * time.Second), TimeoutMs: 30_000,
		IdempotencyKey: sas.IdempotencyKey(orderID, 0, 0, false),
		Payload:        json.RawMessage(`{"amount":1250,"currency":"EUR"}`),
		ReplyTo:        "https://sqs.us-east-1.amazonaws.com/000000000000/caller",
	}
	for _, o := range opts {
		o(&req)
	}
	return req
}

// AtStep makes the request its order's step n, keyed as such.
func AtStep(n int) Option {
	return func(r *sas.AgentRequest) {
		r.Step = n
		r.IdempotencyKey = sas.IdempotencyKey(r.OrderID, n, 0, r.Compensation)
	}
}

// Undo makes the request its step's compensation, under the undo key.
func Undo(r *sas.AgentRequest) {
	r.Compensation = true
	r.IdempotencyKey = sas.IdempotencyKey(r.OrderID, r.Step, 0, true)
}

// Timeout sets the step's limit, which the agent counts from when it starts.
func Timeout(d time.Duration) Option {
	return func(r *sas.AgentRequest) { r.TimeoutMs = d.Milliseconds() }
}

// CompleteBy sets the attempt's lease.
func CompleteBy(t time.Time) Option {
	return func(r *sas.AgentRequest) { r.CompleteBy = t }
}

// Event is an SQS event from the queue arn; a message is a request (any
// value, encoded as JSON) or a raw body string. Message ids are m1, m2, …
// and receipt handles rh-1, rh-2, …
func Event(arn string, msgs ...any) events.SQSEvent {
	ev := events.SQSEvent{}
	for i, m := range msgs {
		body, ok := m.(string)
		if !ok {
			body = sas.Encode(m)
		}
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: fmt.Sprintf("m%d", i+1), ReceiptHandle: fmt.Sprintf("rh-%d", i+1), Body: body,
			EventSource: "aws:sqs", EventSourceARN: arn, AWSRegion: "us-east-1",
		})
	}
	return ev
}
