package scheduler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
	"github.com/sas-go/sas/internal/sizing"
)

// A message on its last receive before the dead-letter queue is sent again
// as a fresh copy and acknowledged unhandled; after MaxRenewals copies it is
// handled as it is, so a message nothing can process still reaches the DLQ.
func TestRenewalKeepsGoodMessagesOutOfTheDLQ(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h, own := renewer(t, f)
	compensate := sas.Encode(sas.Compensate{V: sas.MessageVersion, Kind: sas.KindCompensate, OrderID: "o-none"})
	rec := func(body string, receives string) events.SQSEvent {
		return events.SQSEvent{Records: []events.SQSMessage{{
			MessageId: "m-" + receives, Body: body, EventSource: "aws:sqs",
			EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:sas-scheduler",
			Attributes:     map[string]string{"ApproximateReceiveCount": receives},
		}}}
	}

	require.Empty(t, f.handleWith(h, rec(compensate, "2")), "an earlier receive is handled (and dropped: no such order)")
	require.Empty(t, f.drain(own.URL), "nothing renewed before the last receives")

	body := compensate
	for n := 1; n <= scheduler.MaxRenewals; n++ {
		require.Empty(t, f.handleWith(h, rec(body, "4")), "acknowledged once its copy is out")
		copies := f.drain(own.URL)
		require.Len(t, copies, 1)
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(copies[0]), &m))
		require.EqualValues(t, n, m["sasRenewals"])
		require.Equal(t, "o-none", m["orderId"], "the rest of the body is the message's own")
		body = copies[0]
	}
	require.Empty(t, f.handleWith(h, rec(body, "4")))
	require.Empty(t, f.drain(own.URL), "renewed MaxRenewals times: handled as it is from then on")
}

// renewer is a scheduler handler whose own queue (the scheduler queue,
// visibility 30 s) is f's queue "sas-scheduler".
func renewer(t *testing.T, f *fixture) (*scheduler.Handler, sas.CreatedQueue) {
	t.Helper()
	return renewerOn(t, f, "sas-scheduler", 0, func(c *scheduler.Config, url string) { c.SchedulerQueueURL = url })
}

// renewerOn is a scheduler handler whose own queue, of the given name and
// redrive policy (maxReceives; 0: none), is the one set names in its
// configuration; its MaxReceives is the construct's, as deployed.
func renewerOn(t *testing.T, f *fixture, name string, maxReceives int, set func(*scheduler.Config, string)) (*scheduler.Handler, sas.CreatedQueue) {
	t.Helper()
	own, err := f.q.CreateQueue(f.ctx, sas.CreateQueueParams{Name: name, MaxReceiveCount: maxReceives,
		Attributes: map[string]string{"VisibilityTimeout": "30"}})
	require.NoError(t, err)
	reg, err := registry.Default(stepTimeout)
	require.NoError(t, err)
	cfg := scheduler.Config{
		Store: f.calls, Queue: f.q, Clock: f.clock, Alerter: f.alerts, Workflows: reg, Owner: "renewer",
		AgentQueues: sas.AgentQueues{Default: f.agentURL}, PickupTimeout: time.Minute,
		ReplyToAllowed: func(u string) bool { return u == f.replyURL },
		SigningKey:     sas.NewSigningKey(),
	}
	set(&cfg, own.URL)
	svc, err := scheduler.New(cfg)
	require.NoError(t, err)
	return scheduler.NewHandler(svc), own
}

// A renewal deletes the old message itself, at once: an invocation cut by
// its timeout after the copy went out (a slow batch, an instance that
// died) must not leave the old message to its next receive, and after the
// last one to the dead-letter queue, while its copy carries the work.
func TestRenewalDeletesTheOldMessageAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h, own := renewer(t, f)
	body := sas.Encode(sas.Compensate{V: sas.MessageVersion, Kind: sas.KindCompensate, OrderID: "o-none"})
	_, err := f.q.Send(f.ctx, sas.SendParams{QueueURL: own.URL, Messages: []sas.OutboundMessage{{ID: "0", Body: body}}})
	require.NoError(t, err)
	got, err := f.q.Receive(f.ctx, sas.ReceiveParams{QueueURL: own.URL, Max: 1})
	require.NoError(t, err)
	require.Len(t, got, 1)

	// Its fourth receive, handed to the handler; the batch's own
	// acknowledgement (the event source's delete) never comes.
	_, err = h.Handle(f.ctx, events.SQSEvent{Records: []events.SQSMessage{{
		MessageId: got[0].MessageID, ReceiptHandle: got[0].Receipt, Body: got[0].Body, EventSource: "aws:sqs",
		EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:sas-scheduler",
		Attributes:     map[string]string{"ApproximateReceiveCount": "4"},
	}}})
	require.NoError(t, err)

	f.clock.Advance(time.Minute) // past the old message's visibility
	left := f.drain(own.URL)
	require.Len(t, left, 1, "only the copy is left: %v", left)
	require.Contains(t, left[0], `"sasRenewals":1`)
}

// heldStore holds every Submit until release is closed, signalling entered
// first: a batch whose instance is killed while it handles a record.
type heldStore struct {
	sas.StateStore
	entered chan struct{}
	release chan struct{}
}

func (s *heldStore) Submit(ctx context.Context, p sas.SubmitParams) (sas.SubmitResult, error) {
	s.entered <- struct{}{}
	<-s.release
	return s.StateStore.Submit(ctx, p)
}

// The records of a batch on one of their last receives are renewed before
// any record is handled: an instance killed while it handles the first
// record of its batch (here held at the store) has already renewed the
// last one, and its old message is gone, so it does not reach the
// dead-letter queue on its next receive with the kill.
func TestRenewalComesBeforeTheBatchsWork(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	own, err := f.q.CreateQueue(f.ctx, sas.CreateQueueParams{Name: "sas-scheduler", Attributes: map[string]string{"VisibilityTimeout": "30"}})
	require.NoError(t, err)
	reg, err := registry.Default(stepTimeout)
	require.NoError(t, err)
	store := &heldStore{StateStore: f.calls, entered: make(chan struct{}), release: make(chan struct{})}
	svc, err := scheduler.New(scheduler.Config{
		Store: store, Queue: f.q, Clock: f.clock, Alerter: f.alerts, Workflows: reg, Owner: "renewer",
		AgentQueues: sas.AgentQueues{Default: f.agentURL}, PickupTimeout: time.Minute,
		IntakeQueueURL: intakeQueueURL, SchedulerQueueURL: own.URL, ReplyToAllowed: func(u string) bool { return u == f.replyURL },
		SigningKey: sas.NewSigningKey(),
	})
	require.NoError(t, err)
	h := scheduler.NewHandler(svc)

	body := sas.Encode(sas.Compensate{V: sas.MessageVersion, Kind: sas.KindCompensate, OrderID: "o-none"})
	_, err = f.q.Send(f.ctx, sas.SendParams{QueueURL: own.URL, Messages: []sas.OutboundMessage{{ID: "0", Body: body}}})
	require.NoError(t, err)
	got, err := f.q.Receive(f.ctx, sas.ReceiveParams{QueueURL: own.URL, Max: 1})
	require.NoError(t, err)
	require.Len(t, got, 1)

	// An intake first (its Submit held: the kill lands there), then the
	// message on its fourth receive.
	done := make(chan error, 1)
	go func() {
		_, err := h.Handle(f.ctx, events.SQSEvent{Records: []events.SQSMessage{{
			MessageId: "m-intake", Body: intake("o-held", "payment", f.replyURL), EventSource: "aws:sqs",
			EventSourceARN: intakeARN,
			Attributes:     map[string]string{"ApproximateReceiveCount": "1"},
		}, {
			MessageId: got[0].MessageID, ReceiptHandle: got[0].Receipt, Body: got[0].Body, EventSource: "aws:sqs",
			EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:sas-scheduler",
			Attributes:     map[string]string{"ApproximateReceiveCount": "4"},
		}}})
		done <- err
	}()
	<-store.entered // the batch is at work on its first record: killed here

	f.clock.Advance(time.Minute) // past the old message's visibility
	left := f.drain(own.URL)
	require.Len(t, left, 1, "only the copy is left: %v", left)
	require.Contains(t, left[0], `"sasRenewals":1`)

	close(store.release)
	require.NoError(t, <-done)
}

// Issue 31: with an instance killed every 500 ms, good messages were
// dead-lettered because SQS counts every receive, and a quarter of them never
// reached a handler (the invocation was gone) or reached one that died at
// its work. Here a control message's instances die on every receive: its
// first two reach a handler that dies at its first store call, and of the
// eight after, all but one never reach a handler at all; the one that does
// dies at its work too. Whichever one it is, the message is renewed before
// that work and its copy ends in a handler, never in the dead-letter queue
// (docs/decisions.md, "Ten receives before a dead letter").
func TestAGoodMessageIsRenewedWhicheverReceivesDie(t *testing.T) {
	t.Parallel()
	const chances = 8 // receives on which a message can be renewed
	from := scheduler.RenewFrom(sizing.MaxReceiveCount)
	require.Equal(t, sizing.RenewFromReceive, from, "handled twice, then renewed")
	for reached := sizing.RenewFromReceive; reached < sizing.RenewFromReceive+chances; reached++ {
		t.Run(fmt.Sprintf("receive %d reaches a handler", reached), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			h, own := renewerOn(t, f, "sas-control", sizing.MaxReceiveCount, func(c *scheduler.Config, url string) { c.ControlQueueURL = url })
			body := sas.Encode(sas.Compensate{V: sas.MessageVersion, Kind: sas.KindCompensate, OrderID: "o-dying"})
			_, err := f.q.Send(f.ctx, sas.SendParams{QueueURL: own.URL, Messages: []sas.OutboundMessage{{ID: "0", Body: body}}})
			require.NoError(t, err)

			f.store.mu.Lock()
			f.store.fail["o-dying"] = errors.New("injected: the instance died here")
			f.store.mu.Unlock()
			var copies []sas.InboundMessage
			for len(copies) == 0 {
				got, err := f.q.Receive(f.ctx, sas.ReceiveParams{QueueURL: own.URL, Max: 1})
				require.NoError(t, err)
				if len(got) == 0 {
					break // dead-lettered: its next receive moved it
				}
				m := got[0]
				switch {
				case strings.Contains(m.Body, "sasRenewals"):
					copies = append(copies, m)
				case m.ReceiveCount < from || m.ReceiveCount == reached:
					// A handler, which dies at its work: nothing of the
					// batch is acknowledged by the event source.
					_, err := h.Handle(f.ctx, events.SQSEvent{Records: []events.SQSMessage{{
						MessageId: m.MessageID, ReceiptHandle: m.Receipt, Body: m.Body, EventSource: "aws:sqs",
						EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:sas-control",
						Attributes:     map[string]string{"ApproximateReceiveCount": strconv.Itoa(m.ReceiveCount)},
					}}})
					require.NoError(t, err)
				} // otherwise the receive never reaches a handler
				f.clock.Advance(time.Minute) // past its visibility
			}

			dead, err := f.q.Receive(f.ctx, sas.ReceiveParams{QueueURL: own.DLQURL, Max: 10})
			require.NoError(t, err)
			require.Empty(t, dead, "nothing dead-lettered")
			require.Len(t, copies, 1, "the message was renewed")
			got := copies
			require.Contains(t, got[0].Body, `"sasRenewals":1`)
			require.Equal(t, 1, got[0].ReceiveCount, "a fresh copy: its receives start again")
		})
	}
}
