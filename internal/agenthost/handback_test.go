package agenthost_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/sas"
)

// A request on its receive past MaxDeliveries, one before its queue's
// maxReceiveCount (the construct's 5), is handed back and its message
// deleted before the batch runs anything: an instance killed while it runs
// another request of the batch (here held at the remote) has handed it
// back already, so the request is not lost to the dead-letter queue, where
// no redelivery re-sends it and no agent reports its pick-up (issue 31:
// with an instance killed every 500 ms, 10 requests were dead-lettered).
func TestALateRequestIsHandedBackBeforeTheBatchRuns(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}, 1), make(chan struct{})
	r := newRig(t, rigOptions{remote: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		entered <- struct{}{}
		<-release
		w.WriteHeader(http.StatusServiceUnavailable)
	})})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the remote's server closes (cleanups run last first)
	q, err := r.queue.CreateQueue(t.Context(), sas.CreateQueueParams{
		Name: "agent", MaxReceiveCount: 5, Attributes: map[string]string{"VisibilityTimeout": "270"},
	})
	require.NoError(t, err)
	svc, err := r.deployed(config.Config{SchedulerQueueURL: r.replyURL, PaymentsURL: r.simURL, AgentQueueURL: q.URL, StepTimeout: 30 * time.Second})
	require.NoError(t, err)
	_, err = r.queue.Send(t.Context(), sas.SendParams{QueueURL: q.URL, Messages: []sas.OutboundMessage{
		{ID: "1", Body: sas.Encode(request("order-run"))}, {ID: "2", Body: sas.Encode(request("order-late"))},
	}})
	require.NoError(t, err)
	got, err := r.queue.Receive(t.Context(), sas.ReceiveParams{QueueURL: q.URL, Max: 10})
	require.NoError(t, err)
	require.Len(t, got, 2)
	ev := events.SQSEvent{}
	for i, m := range got {
		receives := 1 // order-run's first delivery
		if i == 1 {
			receives = 4 // order-late's fourth: one before maxReceiveCount
		}
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: m.MessageID, ReceiptHandle: m.Receipt, Body: m.Body,
			EventSource: "aws:sqs", Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(receives)}})
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = svc.Handle(t.Context(), ev)
	}()
	<-entered // the batch runs order-run: the instance is killed here

	r.fake.Advance(time.Hour) // past every visibility timeout, and the hand-back's delay
	msgs, err := r.queue.Receive(t.Context(), sas.ReceiveParams{QueueURL: r.replyURL, Max: 10, Visibility: time.Hour})
	require.NoError(t, err)
	var handedBack []string
	for _, m := range msgs {
		var rt sas.Retry
		require.NoError(t, json.Unmarshal([]byte(m.Body), &rt))
		if rt.Kind == sas.KindRetry && rt.Requeue {
			handedBack = append(handedBack, rt.OrderID)
		}
	}
	require.Equal(t, []string{"order-late"}, handedBack, "order-late handed back already")
	left, err := r.queue.Receive(t.Context(), sas.ReceiveParams{QueueURL: q.URL, Max: 10})
	require.NoError(t, err)
	require.Len(t, left, 1, "order-late's message deleted at once; order-run's comes back")
	require.Contains(t, left[0].Body, "order-run")

	unblock()
	<-done
}
