package agenthost_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/agenthost"
	"github.com/sas-go/sas/internal/memqueue"
	"github.com/sas-go/sas/internal/sas"
)

// receivedFrom sends requests to a new queue of r's memqueue named name and
// receives them as Lambda's event source would: real receipt handles, and
// the queue's ARN in each record.
func (r *serviceRig) receivedFrom(name string, reqs ...sas.AgentRequest) (string, []events.SQSMessage) {
	r.t.Helper()
	q, err := r.queue.CreateQueue(r.t.Context(), sas.CreateQueueParams{Name: name})
	require.NoError(r.t, err)
	arn, err := r.queue.QueueARN(q.URL)
	require.NoError(r.t, err)
	var out []sas.OutboundMessage
	for i, req := range reqs {
		out = append(out, sas.OutboundMessage{ID: fmt.Sprint(i), Body: sas.Encode(req)})
	}
	sent, err := r.queue.Send(r.t.Context(), sas.SendParams{QueueURL: q.URL, Messages: out})
	require.NoError(r.t, err)
	require.Empty(r.t, sent.Failed)
	msgs, err := r.queue.Receive(r.t.Context(), sas.ReceiveParams{QueueURL: q.URL, Max: 10, Visibility: time.Hour})
	require.NoError(r.t, err)
	require.Len(r.t, msgs, len(reqs))
	var recs []events.SQSMessage
	for _, m := range msgs {
		recs = append(recs, events.SQSMessage{MessageId: m.MessageID, ReceiptHandle: m.Receipt, Body: m.Body,
			EventSource: "aws:sqs", EventSourceARN: arn})
	}
	return q.URL, recs
}

// orderIDs receives what url holds now, by order id.
func (r *serviceRig) orderIDs(url string) []string {
	r.t.Helper()
	msgs, err := r.queue.Receive(r.t.Context(), sas.ReceiveParams{QueueURL: url, Max: 10, Visibility: time.Hour})
	require.NoError(r.t, err)
	ids := []string{}
	for _, m := range msgs {
		var req sas.AgentRequest
		require.NoError(r.t, json.Unmarshal([]byte(m.Body), &req))
		ids = append(ids, req.OrderID)
	}
	return ids
}

func noOutcome(context.Context, sas.AgentRequest) (json.RawMessage, error) {
	return nil, errors.New("connection refused")
}

// An agent's function polls its queue and its priority lane; one batch
// holds requests of one queue, but the same Service serves both. A request
// left for redelivery has its visibility changed on the queue it came from
// (its receipt handle is good nowhere else), matched by the queue's name in
// the event's ARN.
func TestBackoffGoesToTheQueueTheRequestCameFrom(t *testing.T) {
	t.Parallel()
	r := newServiceRig(t, memqueue.Options{})
	vis := &visibilityRecorder{Queue: r.queue}
	lane, fromLane := r.receivedFrom("payments-hi", request("o-hi"))
	main, fromMain := r.receivedFrom("payments", request("o-lo"))
	svc := r.service(agenthost.Config{Queue: vis, RequestQueueURL: main, PriorityQueueURL: lane, Agents: payments(noOutcome)})

	for _, rec := range []events.SQSMessage{fromLane[0], fromMain[0]} {
		resp := handleWith(t, svc, events.SQSEvent{Records: []events.SQSMessage{rec}})
		require.Equal(t, []string{rec.MessageId}, failedIDs(resp))
	}
	require.Len(t, vis.got, 2)
	require.Equal(t, sas.ChangeVisibilityParams{QueueURL: lane, Receipt: fromLane[0].ReceiptHandle, Timeout: time.Second}, vis.got[0])
	require.Equal(t, sas.ChangeVisibilityParams{QueueURL: main, Receipt: fromMain[0].ReceiptHandle, Timeout: time.Second}, vis.got[1])

	// Each comes back on its own queue after the backoff, not the hour it
	// was received for.
	r.clock.Advance(time.Second)
	require.Equal(t, []string{"o-hi"}, r.orderIDs(lane))
	require.Equal(t, []string{"o-lo"}, r.orderIDs(main))
}

// Where the queue cannot be told, the visibility is left alone (the request
// comes back after the queue's visibility timeout): a receipt handle sent to
// the wrong queue would fail there anyway.
func TestBackoffWithAnUnknownQueueIsLeftAlone(t *testing.T) {
	t.Parallel()
	r := newServiceRig(t, memqueue.Options{})
	vis := &visibilityRecorder{Queue: r.queue}
	lane, _ := r.receivedFrom("payments-hi")
	main, recs := r.receivedFrom("payments", request("o-1"), request("o-2"))
	_, other := r.receivedFrom("someone-else", request("o-3"))
	recs[1].EventSourceARN = "" // two queues: no ARN, no way to tell
	svc := r.service(agenthost.Config{Queue: vis, RequestQueueURL: main, PriorityQueueURL: lane, Agents: payments(noOutcome)})

	resp := handleWith(t, svc, events.SQSEvent{Records: []events.SQSMessage{recs[0], recs[1], other[0]}})
	require.Len(t, failedIDs(resp), 3, "all left for redelivery")
	require.Equal(t, map[string]time.Duration{recs[0].ReceiptHandle: time.Second}, vis.changes())
	require.Contains(t, r.logs.String(), "is none of this agent's")

	// One queue known and no ARN (an older poller): that queue, as before.
	r2 := newServiceRig(t, memqueue.Options{})
	vis2 := &visibilityRecorder{Queue: r2.queue}
	only, recs2 := r2.receivedFrom("payments", request("o-4"))
	recs2[0].EventSourceARN = ""
	svc2 := r2.service(agenthost.Config{Queue: vis2, RequestQueueURL: only, Agents: payments(noOutcome)})
	handleWith(t, svc2, events.SQSEvent{Records: recs2})
	require.Equal(t, []sas.ChangeVisibilityParams{{QueueURL: only, Receipt: recs2[0].ReceiptHandle, Timeout: time.Second}}, vis2.got)
}

// A runner that asks for a later redelivery (*RedeliveryError, found
// through wrapping) gets that visibility, at least the usual backoff and at
// most SQS's 12 hours; on the last delivery the request is handed back to the scheduler with that delay,
// bounded to SQS's 15 minutes.
func TestRedeliveryErrorSetsTheVisibilityAskedFor(t *testing.T) {
	t.Parallel()
	r := newServiceRig(t, memqueue.Options{})
	vis := &visibilityRecorder{Queue: r.queue}
	asks := map[string]time.Duration{"o-7m": 7 * time.Minute, "o-20h": 20 * time.Hour, "o-last": time.Hour, "o-now": 0}
	url, recs := r.receivedFrom("payments", request("o-7m"), request("o-20h"), request("o-last"), request("o-now"))
	ev := withReceives(events.SQSEvent{Records: recs}, "1", "2", "3", "2")
	svc := r.service(agenthost.Config{Queue: vis, RequestQueueURL: url, Agents: payments(func(_ context.Context, req sas.AgentRequest) (json.RawMessage, error) {
		return nil, fmt.Errorf("calling the service: %w", &agenthost.RedeliveryError{Delay: asks[req.OrderID], Err: errors.New("HTTP 429")})
	})})

	resp := handleWith(t, svc, ev)
	byOrder := map[string]events.SQSMessage{}
	for _, rec := range recs {
		var req sas.AgentRequest
		require.NoError(t, json.Unmarshal([]byte(rec.Body), &req))
		byOrder[req.OrderID] = rec
	}
	require.ElementsMatch(t, []string{byOrder["o-7m"].MessageId, byOrder["o-20h"].MessageId, byOrder["o-now"].MessageId}, failedIDs(resp),
		"the third delivery is the last: handed back")
	require.Equal(t, map[string]time.Duration{
		byOrder["o-7m"].ReceiptHandle:  7 * time.Minute,
		byOrder["o-20h"].ReceiptHandle: 12 * time.Hour,
		byOrder["o-now"].ReceiptHandle: 2 * time.Second, // "at once" is no sooner than the usual backoff
	}, vis.changes())
	require.Contains(t, r.logs.String(), `"why":"retry after 7m0s"`)

	// The hand-back waits as asked, as far as SQS lets a message wait.
	msgs, err := r.queue.Receive(t.Context(), sas.ReceiveParams{QueueURL: r.replyURL, Max: 10})
	require.NoError(t, err)
	require.Empty(t, msgs, "delayed")
	r.clock.Advance(15 * time.Minute)
	msgs, err = r.queue.Receive(t.Context(), sas.ReceiveParams{QueueURL: r.replyURL, Max: 10})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	var rt sas.Retry
	require.NoError(t, json.Unmarshal([]byte(msgs[0].Body), &rt))
	require.Equal(t, "o-last", rt.OrderID)
	require.True(t, rt.Requeue)
}
