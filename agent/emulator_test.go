package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sqsqueue"
	"github.com/sas-go/sas/internal/testkit/emulator"
)

// sqsWorld is real queues on the SQS emulator (or AWS): the scheduler's,
// an agent's, and its priority lane.
type sqsWorld struct {
	t      *testing.T
	client *sqs.Client
	q      *sqsqueue.Queue
}

// queue creates a queue for this test and returns its URL and ARN.
func (w *sqsWorld) queue(prefix string) (url, arn string) {
	w.t.Helper()
	created, err := w.q.CreateQueue(w.t.Context(), sas.CreateQueueParams{Name: emulator.UniqueName(w.t, prefix)})
	require.NoError(w.t, err)
	w.t.Cleanup(func() {
		if err := w.q.DeleteQueue(context.Background(), created.URL); err != nil {
			w.t.Logf("cleanup: %v", err)
		}
	})
	arn, err = w.q.QueueARN(w.t.Context(), created.URL)
	require.NoError(w.t, err)
	return created.URL, arn
}

func (w *sqsWorld) send(url string, bodies ...string) {
	w.t.Helper()
	var msgs []sas.OutboundMessage
	for i, b := range bodies {
		msgs = append(msgs, sas.OutboundMessage{ID: strconv.Itoa(i), Body: b})
	}
	res, err := w.q.Send(w.t.Context(), sas.SendParams{QueueURL: url, Messages: msgs})
	require.NoError(w.t, err)
	require.Empty(w.t, res.Failed)
}

// receive receives n messages from url for an hour, as an event of the
// queue (its ARN in each record), waiting at most 20 s for them.
func (w *sqsWorld) receive(url, arn string, n int) events.SQSEvent {
	w.t.Helper()
	var ev events.SQSEvent
	for end := time.Now().Add(20 * time.Second); len(ev.Records) < n && time.Now().Before(end); {
		msgs, err := w.q.Receive(w.t.Context(), sas.ReceiveParams{QueueURL: url, Max: 10, Wait: time.Second, Visibility: time.Hour})
		require.NoError(w.t, err)
		for _, m := range msgs {
			ev.Records = append(ev.Records, events.SQSMessage{
				MessageId: m.MessageID, ReceiptHandle: m.Receipt, Body: m.Body, EventSource: "aws:sqs", EventSourceARN: arn,
				Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(max(m.ReceiveCount, 1))},
			})
		}
	}
	require.Len(w.t, ev.Records, n, "messages received from %s", url)
	return ev
}

// ack deletes the records the handler did not list as failed, as Lambda's
// event source does.
func (w *sqsWorld) ack(url string, ev events.SQSEvent, resp events.SQSEventResponse) {
	w.t.Helper()
	var receipts []string
	for _, r := range ev.Records {
		if !slices.Contains(failedIDs(resp), r.MessageId) {
			receipts = append(receipts, r.ReceiptHandle)
		}
	}
	if len(receipts) > 0 {
		res, err := w.q.Delete(w.t.Context(), sas.DeleteParams{QueueURL: url, Receipts: receipts})
		require.NoError(w.t, err)
		require.Empty(w.t, res.Failed)
	}
}

func orderOf(t *testing.T, body string) string {
	t.Helper()
	var req sas.AgentRequest
	require.NoError(t, json.Unmarshal([]byte(body), &req))
	return req.OrderID
}

// The SDK's handler on real SQS, built as a user builds it (an *sqs.Client):
// a batch of the agent's queue with a success, a permanent failure, a
// RetryAfter beyond its deadline and a malformed message, and a batch of
// its priority lane with a request that runs out of tries. The replies
// reach the scheduler's queue; the requests left without an outcome come
// back, each on its own queue, soon, although they were received for an
// hour: their visibility was changed on the queue they came from.
func TestHandlerOnSQS(t *testing.T) {
	t.Parallel()
	cfg := emulator.Require(t)
	w := &sqsWorld{t: t, client: sqs.NewFromConfig(cfg)}
	w.q = sqsqueue.New(w.client)
	sched, _ := w.queue("sched")
	mainURL, mainARN := w.queue("flights")
	laneURL, laneARN := w.queue("flights-hi")

	a := agent.New("flights", agent.Tries(2), agent.Backoff(10*time.Millisecond, 10*time.Millisecond)).
		Step("reserve-flight", func(_ context.Context, req agent.Request) (any, error) {
			switch req.OrderID {
			case "o-ok":
				return map[string]string{"reservation": "R-1"}, nil
			case "o-full":
				return nil, agent.Permanent(errors.New("flight FL123 is full"))
			case "o-later":
				return nil, agent.RetryAfter(2*time.Second, errors.New("HTTP 429"))
			}
			return nil, errors.New("HTTP 503")
		}, nil)
	h, err := agent.NewHandler(agent.HandlerConfig{
		Agents: []*agent.Agent{a}, SchedulerQueueURL: sched, QueueURL: mainURL, PriorityQueueURL: laneURL,
		SQS: w.client, Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)

	now := func(opts ...func(*sas.AgentRequest)) []func(*sas.AgentRequest) {
		return append([]func(*sas.AgentRequest){func(r *sas.AgentRequest) { r.CompleteBy = time.Now().Add(time.Minute) }}, opts...)
	}
	w.send(mainURL,
		sas.Encode(request("o-ok", now()...)),
		sas.Encode(request("o-full", now()...)),
		sas.Encode(request("o-later", now(timeout(500*time.Millisecond))...)),
		`{"v":1,"kind":"agent.request","orderId":`)
	w.send(laneURL, sas.Encode(request("o-hi", now(func(r *sas.AgentRequest) { r.Priority = 9 })...)))

	mainEv := w.receive(mainURL, mainARN, 4)
	resp, err := h.Handle(t.Context(), mainEv)
	require.NoError(t, err)
	require.Len(t, resp.BatchItemFailures, 1, "only o-later is left for redelivery")
	for _, r := range mainEv.Records {
		if r.MessageId == resp.BatchItemFailures[0].ItemIdentifier {
			require.Equal(t, "o-later", orderOf(t, r.Body))
		}
	}
	w.ack(mainURL, mainEv, resp)
	laneEv := w.receive(laneURL, laneARN, 1)
	resp, err = h.Handle(t.Context(), laneEv)
	require.NoError(t, err)
	require.Equal(t, []string{laneEv.Records[0].MessageId}, failedIDs(resp))

	// The replies.
	replies := w.receive(sched, "", 2)
	byOrder := map[string]sas.AgentReply{}
	for _, r := range replies.Records {
		var rep sas.AgentReply
		require.NoError(t, json.Unmarshal([]byte(r.Body), &rep))
		byOrder[rep.OrderID] = rep
	}
	require.Equal(t, sas.OutcomeDone, byOrder["o-ok"].Outcome)
	require.JSONEq(t, `{"reservation":"R-1"}`, string(byOrder["o-ok"].Result))
	require.Equal(t, sas.OutcomeFailed, byOrder["o-full"].Outcome)
	require.Equal(t, "flight FL123 is full", byOrder["o-full"].Reason)

	// What was left comes back, each on its own queue.
	again := w.receive(mainURL, mainARN, 1)
	require.Equal(t, "o-later", orderOf(t, again.Records[0].Body))
	again = w.receive(laneURL, laneARN, 1)
	require.Equal(t, "o-hi", orderOf(t, again.Records[0].Body))
}
