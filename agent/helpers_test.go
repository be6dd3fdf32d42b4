package agent_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/agentqueue"
	"github.com/sas-go/sas/internal/memqueue"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
	"github.com/sas-go/sas/internal/testkit/logtest"
	"github.com/sas-go/sas/internal/testkit/requesttest"
)

// fixture is a handler's world in memory: a fake clock (whose Sleep the
// SDK's waits go through), an in-memory queue with the scheduler's queue,
// and the logs.
type fixture struct {
	t        *testing.T
	clock    *clocktest.Clock
	queue    *memqueue.Queue
	replyURL string
	logs     *logtest.Buffer
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: clocktest.New(clocktest.T0), logs: &logtest.Buffer{}}
	f.queue = memqueue.New(memqueue.Options{Clock: f.clock})
	q, err := f.queue.CreateQueue(t.Context(), sas.CreateQueueParams{Name: "scheduler"})
	require.NoError(t, err)
	f.replyURL = q.URL
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent logs:\n%s", f.logs.String())
		}
	})
	return f
}

// config is a HandlerConfig on the fixture's queue and clock.
func (f *fixture) config(agents ...*agent.Agent) agent.HandlerConfig {
	cfg := agent.HandlerConfig{
		Agents: agents, SchedulerQueueURL: f.replyURL, Clock: f.clock,
		Logger: slog.New(slog.NewJSONHandler(f.logs, nil)),
	}
	agentqueue.Use(&cfg, f.queue)
	return cfg
}

func (f *fixture) handler(agents ...*agent.Agent) *agent.Handler {
	f.t.Helper()
	h, err := agent.NewHandler(f.config(agents...))
	require.NoError(f.t, err)
	return h
}

// handle runs one event; the handler never fails a batch as a whole.
func (f *fixture) handle(h *agent.Handler, ev events.SQSEvent) events.SQSEventResponse {
	f.t.Helper()
	resp, err := h.Handle(f.t.Context(), ev)
	require.NoError(f.t, err)
	require.NotNil(f.t, resp.BatchItemFailures, "batchItemFailures must be a list, never null")
	return resp
}

// replies drains the scheduler's queue.
func (f *fixture) replies() []sas.AgentReply {
	f.t.Helper()
	var out []sas.AgentReply
	for {
		msgs, err := f.queue.Receive(f.t.Context(), sas.ReceiveParams{QueueURL: f.replyURL, Max: 10, Visibility: time.Hour})
		require.NoError(f.t, err)
		if len(msgs) == 0 {
			return out
		}
		for _, m := range msgs {
			var rep sas.AgentReply
			dec := json.NewDecoder(strings.NewReader(m.Body))
			dec.DisallowUnknownFields()
			require.NoError(f.t, dec.Decode(&rep), m.Body)
			out = append(out, rep)
		}
	}
}

// received sends requests to a new queue named name and receives them for
// an hour, as the event source does: real receipt handles, and the queue's
// ARN in each record.
func (f *fixture) received(name string, reqs ...sas.AgentRequest) (string, []events.SQSMessage) {
	f.t.Helper()
	q, err := f.queue.CreateQueue(f.t.Context(), sas.CreateQueueParams{Name: name})
	require.NoError(f.t, err)
	arn, err := f.queue.QueueARN(q.URL)
	require.NoError(f.t, err)
	var out []sas.OutboundMessage
	for i, req := range reqs {
		out = append(out, sas.OutboundMessage{ID: fmt.Sprint(i), Body: sas.Encode(req)})
	}
	if len(out) > 0 {
		sent, err := f.queue.Send(f.t.Context(), sas.SendParams{QueueURL: q.URL, Messages: out})
		require.NoError(f.t, err)
		require.Empty(f.t, sent.Failed)
	}
	msgs, err := f.queue.Receive(f.t.Context(), sas.ReceiveParams{QueueURL: q.URL, Max: 10, Visibility: time.Hour})
	require.NoError(f.t, err)
	require.Len(f.t, msgs, len(reqs))
	var recs []events.SQSMessage
	for _, m := range msgs {
		recs = append(recs, events.SQSMessage{MessageId: m.MessageID, ReceiptHandle: m.Receipt, Body: m.Body,
			EventSource: "aws:sqs", EventSourceARN: arn})
	}
	return q.URL, recs
}

// visible receives what url holds at the clock's now, by order id.
func (f *fixture) visible(url string) []string {
	f.t.Helper()
	msgs, err := f.queue.Receive(f.t.Context(), sas.ReceiveParams{QueueURL: url, Max: 10, Visibility: time.Hour})
	require.NoError(f.t, err)
	ids := []string{}
	for _, m := range msgs {
		var req sas.AgentRequest
		require.NoError(f.t, json.Unmarshal([]byte(m.Body), &req))
		ids = append(ids, req.OrderID)
	}
	return ids
}

// request is an agent.request for agent "flights", step "reserve-flight"
// (index 1, second attempt), as the scheduler sends it at clocktest.T0: a
// 30s limit (requesttest.Request, with this agent's fields).
func request(orderID string, opts ...func(*sas.AgentRequest)) sas.AgentRequest {
	flights := func(r *sas.AgentRequest) {
		r.Attempt, r.Workflow, r.Action, r.Priority, r.Version = 2, "trip", "POST /reservations", 7, "v3"
		r.Payload = json.RawMessage(`{"flight":"FL123","seats":2}`)
		r.ReplyTo = "https://sqs.example/caller"
	}
	return requesttest.Request("flights", "reserve-flight", orderID, append([]func(*sas.AgentRequest){flights, requesttest.AtStep(1)}, opts...)...)
}

// undo makes the request its step's compensation.
func undo(req *sas.AgentRequest) {
	requesttest.Undo(req)
	req.Action = "POST /reservations/cancel"
}

func step(name string) func(*sas.AgentRequest) {
	return func(r *sas.AgentRequest) { r.StepName = name }
}

var timeout = requesttest.Timeout

// event makes an SQS event of requests (encoded) or raw bodies, from the
// flights queue.
func event(msgs ...any) events.SQSEvent {
	return requesttest.Event("arn:aws:sqs:us-east-1:000000000000:flights", msgs...)
}

func failedIDs(resp events.SQSEventResponse) []string {
	ids := []string{}
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

// requireEcho checks what every reply echoes of its request.
func requireEcho(t *testing.T, req sas.AgentRequest, rep sas.AgentReply) {
	t.Helper()
	require.Equal(t, req.OrderID, rep.OrderID)
	require.Equal(t, req.Step, rep.Step)
	require.Equal(t, req.Attempt, rep.Attempt)
	require.Equal(t, req.LockedBy, rep.LockedBy)
	require.Equal(t, req.Agent, rep.Agent)
	require.Equal(t, req.Workflow, rep.Workflow)
	require.Equal(t, req.StepName, rep.StepName)
	require.Equal(t, req.Compensation, rep.Compensation)
	require.Equal(t, req.Priority, rep.Priority)
	require.Equal(t, req.Version, rep.Version)
}
