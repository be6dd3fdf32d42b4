package scheduler_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
)

// A message on its last receive before the dead-letter queue is sent again
// as a fresh copy and acknowledged unhandled; after MaxRenewals copies it is
// handled as it is, so a message nothing can process still reaches the DLQ.
func TestRenewalKeepsGoodMessagesOutOfTheDLQ(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	own, err := f.q.CreateQueue(f.ctx, sas.CreateQueueParams{Name: "sas-scheduler"})
	require.NoError(t, err)
	reg, err := registry.Default(stepTimeout)
	require.NoError(t, err)
	svc, err := scheduler.New(scheduler.Config{
		Store: f.calls, Queue: f.q, Clock: f.clock, Alerter: f.alerts, Workflows: reg, Owner: "renewer",
		AgentQueues: sas.AgentQueues{Default: f.agentURL}, PickupTimeout: time.Minute,
		SchedulerQueueURL: own.URL, ReplyToAllowed: func(u string) bool { return u == f.replyURL },
		SigningKey: sas.NewSigningKey(),
	})
	require.NoError(t, err)
	h := scheduler.NewHandler(svc)
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
