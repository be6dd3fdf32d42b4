package agenthost_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/agenthost"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sizing"
)

// A request on its receive past MaxDeliveries, one before its queue's
// maxReceiveCount (5 in this test's queue), is handed back and its message
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
	q, svc := r.queued(t, 5, "order-run", "order-late")
	got, err := r.queue.Receive(t.Context(), sas.ReceiveParams{QueueURL: q.URL, Max: 10})
	require.NoError(t, err)
	require.Len(t, got, 2)
	ev := received(got, func(m sas.InboundMessage) int {
		if strings.Contains(m.Body, "order-late") {
			return 4 // order-late's fourth: one before maxReceiveCount
		}
		return 1 // order-run's first delivery
	})

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

// Issue 31: a request's instances die on every receive, and most of its
// receives never reach a handler at all (an invocation gone, or throttled,
// after its poller received the batch); SQS counts them all the same. Of
// the seven receives from the one past MaxDeliveries on (the fourth to the
// queue's tenth, sizing.MaxReceiveCount), whichever single one reaches a
// handler hands the request back to the scheduler and deletes it, so it is
// sent again rather than dead-lettered (docs/decisions.md, "Ten receives
// before a dead letter").
func TestALateRequestIsHandedBackWhateverReceivesDied(t *testing.T) {
	t.Parallel()
	const chances = 7 // receives on which a late request can be handed back
	first := agenthost.DefaultMaxDeliveries + 1
	for reached := first; reached < first+chances; reached++ {
		t.Run(fmt.Sprintf("receive %d reaches a handler", reached), func(t *testing.T) {
			t.Parallel()
			r := newRig(t, rigOptions{})
			q, svc := r.queued(t, sizing.MaxReceiveCount, "order-dying")

			for {
				got, err := r.queue.Receive(t.Context(), sas.ReceiveParams{QueueURL: q.URL, Max: 1})
				require.NoError(t, err)
				if len(got) == 0 {
					break // handed back and deleted, or dead-lettered
				}
				if got[0].ReceiveCount == reached {
					_, err := svc.Handle(t.Context(), received(got, func(m sas.InboundMessage) int { return m.ReceiveCount }))
					require.NoError(t, err) // and its instance dies: the event source acknowledges nothing
				} // otherwise the receive never reaches a handler
				r.fake.Advance(time.Hour) // past its visibility
			}

			dead, err := r.queue.Receive(t.Context(), sas.ReceiveParams{QueueURL: q.DLQURL, Max: 10})
			require.NoError(t, err)
			require.Empty(t, dead, "nothing dead-lettered")
			msgs, err := r.queue.Receive(t.Context(), sas.ReceiveParams{QueueURL: r.replyURL, Max: 10})
			require.NoError(t, err)
			require.Len(t, msgs, 1)
			var rt sas.Retry
			require.NoError(t, json.Unmarshal([]byte(msgs[0].Body), &rt))
			require.True(t, rt.Kind == sas.KindRetry && rt.Requeue && rt.OrderID == "order-dying", "handed back: %s", msgs[0].Body)
		})
	}
}

// Issue 31: a redelivered request answered while another request of its
// batch is still at work (a call that hangs runs to its deadline) has its
// message deleted as soon as its reply is out, not when the batch ends: an
// instance killed meanwhile would leave it for redelivery with the slow
// one, and the batch was received together, and cut together, until every
// request of it was dead-lettered. A first delivery is left to the event
// source (the happy path's requests are unchanged).
func TestAnAnsweredRedeliveryIsDeletedBeforeItsBatchEnds(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}, 1), make(chan struct{})
	r := newRig(t, rigOptions{remote: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasPrefix(req.Header.Get("Idempotency-Key"), "order-held") {
			entered <- struct{}{}
			<-release
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	q, svc := r.queued(t, sizing.MaxReceiveCount, "order-done", "order-first", "order-held")
	got, err := r.queue.Receive(t.Context(), sas.ReceiveParams{QueueURL: q.URL, Max: 10})
	require.NoError(t, err)
	require.Len(t, got, 3)
	ev := received(got, func(m sas.InboundMessage) int {
		if strings.Contains(m.Body, "order-first") {
			return 1
		}
		return 2 // redeliveries
	})

	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = svc.Handle(t.Context(), ev)
	}()
	<-entered // order-held's call hangs
	require.Eventually(t, func() bool {
		d, err := r.queue.Depth(t.Context(), q.URL)
		require.NoError(t, err)
		replies, err := r.queue.Depth(t.Context(), r.replyURL)
		require.NoError(t, err)
		return d.Total() == 2 && replies.Total() == 2
	}, 10*time.Second, 10*time.Millisecond, "both replies out, and one message deleted") // waits on the linger, not on time passing
	// The instance is killed here: nothing else of the batch happens.
	r.fake.Advance(time.Hour) // past every visibility timeout
	left, err := r.queue.Receive(t.Context(), sas.ReceiveParams{QueueURL: q.URL, Max: 10})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"order-first", "order-held"}, ordersOf(t, left),
		"order-done's message deleted once answered; a first delivery's and the unanswered one's come back")

	unblock()
	<-done
}

// received is the event an event source hands the agent for messages it
// received, each with the receive count receives gives it.
func received(msgs []sas.InboundMessage, receives func(sas.InboundMessage) int) events.SQSEvent {
	ev := events.SQSEvent{}
	for _, m := range msgs {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: m.MessageID, ReceiptHandle: m.Receipt, Body: m.Body,
			EventSource: "aws:sqs", Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(receives(m))}})
	}
	return ev
}

// ordersOf names the orders of the requests msgs carry.
func ordersOf(t *testing.T, msgs []sas.InboundMessage) []string {
	t.Helper()
	var ids []string
	for _, m := range msgs {
		var req sas.AgentRequest
		require.NoError(t, json.Unmarshal([]byte(m.Body), &req))
		ids = append(ids, req.OrderID)
	}
	return ids
}

// queued deploys the built-in agent on an agent queue that allows
// maxReceives receives, with a request of each order in it.
func (r *rig) queued(t *testing.T, maxReceives int, orders ...string) (sas.CreatedQueue, *agent.Handler) {
	t.Helper()
	q, err := r.queue.CreateQueue(t.Context(), sas.CreateQueueParams{
		Name: "agent", MaxReceiveCount: maxReceives, Attributes: map[string]string{"VisibilityTimeout": "270"},
	})
	require.NoError(t, err)
	svc, err := r.deployed(config.Config{SchedulerQueueURL: r.replyURL, PaymentsURL: r.simURL, AgentQueueURL: q.URL, StepTimeout: 30 * time.Second})
	require.NoError(t, err)
	var msgs []sas.OutboundMessage
	for i, o := range orders {
		msgs = append(msgs, sas.OutboundMessage{ID: strconv.Itoa(i), Body: sas.Encode(request(o))})
	}
	_, err = r.queue.Send(t.Context(), sas.SendParams{QueueURL: q.URL, Messages: msgs})
	require.NoError(t, err)
	return q, svc
}
