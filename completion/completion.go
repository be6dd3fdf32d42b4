// Package completion completes, fails or heartbeats a step that waits for
// the outside world: a callback step (docs/protocol.md, "Callback steps").
//
// When a callback step starts, the deployment hands out its token: in a
// "waiting" status on the order's replyTo queue, and in a notification to
// the people the alerter reaches. Whoever holds the token tells the
// deployment what became of the step by sending a message to its intake
// queue (whose policy names who may: docs/trust.md, "Completion tokens").
// The token is the right to do so: it cannot be guessed or forged, it
// names one attempt of one step of one order, and the step takes the first
// completion only. A completion that arrives late (the step was given up
// at its timeout) or again changes nothing.
//
//	c := completion.New(completion.SQS(sqs.NewFromConfig(cfg)), intakeQueueURL)
//	err := c.Complete(ctx, token, map[string]any{"approvedBy": "alice"})
//
// A result flows on like any step's result: to the steps after it and in
// the order's processed status. A failure is a give-up of the step (its
// order compensated, an operator alerted); a rejection
// (Client.Reject) is a business outcome: the order is compensated and ends
// Rejected, and nobody is paged.
package completion

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sas-go/sas/internal/sas"
)

// Sender sends one message body to a queue: SQS(client) over an
// *sqs.Client, or your own transport.
type Sender interface {
	Send(ctx context.Context, queueURL, body string) error
}

// SQS is a Sender over an SQS client.
func SQS(c *sqs.Client) Sender { return sqsSender{c} }

type sqsSender struct{ c *sqs.Client }

func (s sqsSender) Send(ctx context.Context, queueURL, body string) error {
	_, err := s.c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body)})
	return err
}

// Client sends completions to a deployment's queue.
type Client struct {
	sqs      Sender
	queueURL string
	// Actor, when set, is who the completion says it comes from: recorded
	// beside the queue's own word for the sender (its SenderId).
	Actor string
}

// New returns a Client that sends to queueURL, the deployment's intake
// queue (SAS_INTAKE_QUEUE_URL).
func New(s Sender, queueURL string) *Client { return &Client{sqs: s, queueURL: queueURL} }

// Complete reports the step done with result (marshalled to JSON; nil for
// none, at most 16 KiB).
func (c *Client) Complete(ctx context.Context, token string, result any) error {
	var raw json.RawMessage
	if result != nil {
		b, err := json.Marshal(result)
		if err != nil {
			return fmt.Errorf("completion result: %w", err)
		}
		raw = b
	}
	return c.send(ctx, Message{Token: token, Outcome: Done, Result: raw})
}

// Fail reports the step failed for reason: its order is compensated and an
// operator alerted, as for any step given up.
func (c *Client) Fail(ctx context.Context, token, reason string) error {
	return c.send(ctx, Message{Token: token, Outcome: Failed, Reason: reason})
}

// Reject reports the step refused as a business outcome (a person said
// no): its order is compensated and ends Rejected, and nobody is paged.
func (c *Client) Reject(ctx context.Context, token, reason string) error {
	return c.send(ctx, Message{Token: token, Outcome: Failed, Reason: reason, Rejected: true})
}

// Heartbeat tells a step with a heartbeat timeout that its work goes on:
// its deadline moves on by the heartbeat interval, never past its timeout.
func (c *Client) Heartbeat(ctx context.Context, token string) error {
	return c.send(ctx, Message{Token: token, Outcome: Heartbeat})
}

func (c *Client) send(ctx context.Context, m Message) error {
	if m.Actor == "" {
		m.Actor = c.Actor
	}
	body, err := m.Body()
	if err != nil {
		return err
	}
	if err := c.sqs.Send(ctx, c.queueURL, body); err != nil {
		return fmt.Errorf("sending the %s completion: %w", m.Outcome, err)
	}
	return nil
}

// Outcome is what a completion says became of the step.
type Outcome string

const (
	Done      Outcome = "done"
	Failed    Outcome = "failed"
	Heartbeat Outcome = "heartbeat"
)

// Message is a completion as it goes on the wire, for a sender that does
// not use Client (another language, another transport to the same queue).
type Message struct {
	Token    string
	Outcome  Outcome
	Result   json.RawMessage // Done only
	Reason   string          // Failed only
	Rejected bool            // Failed only: a business rejection
	Actor    string
}

// ErrInvalid is a completion no step could take: it is refused before it
// is sent, with the reason.
var ErrInvalid = errors.New("completion not valid")

// Body is the message's JSON body, checked as the deployment checks it.
func (m Message) Body() (string, error) {
	w := sas.Completion{V: sas.MessageVersion, Kind: sas.KindComplete, Token: m.Token, Outcome: sas.Outcome(m.Outcome),
		Result: m.Result, Reason: m.Reason, Rejected: m.Rejected, Actor: m.Actor}
	if err := w.Check(); err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return sas.Encode(w), nil
}
