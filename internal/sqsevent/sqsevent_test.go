package sqsevent

import (
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
)

func TestEventAndDone(t *testing.T) {
	t.Parallel()
	sent := clocktest.T0
	msgs := []sas.InboundMessage{
		{MessageID: "a", Receipt: "ra", Body: "A", ReceiveCount: 2, SentAt: sent},
		{MessageID: "b", Receipt: "rb", Body: "B", SentAt: sent},
	}
	ev := Event("arn:aws:sqs:us-east-1:000000000000:q", msgs)
	require.Len(t, ev.Records, 2)
	r := ev.Records[0]
	require.Equal(t, "a", r.MessageId)
	require.Equal(t, "ra", r.ReceiptHandle)
	require.Equal(t, "A", r.Body)
	require.Equal(t, "aws:sqs", r.EventSource)
	require.Equal(t, "arn:aws:sqs:us-east-1:000000000000:q", r.EventSourceARN)
	require.Equal(t, "2", r.Attributes["ApproximateReceiveCount"])
	require.Equal(t, "1800000000000", r.Attributes["SentTimestamp"])
	require.Equal(t, "1", ev.Records[1].Attributes["ApproximateReceiveCount"], "a received message was received once at least")

	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: "b"}}}
	require.Equal(t, map[string]bool{"b": true}, Failed(resp))
	require.Equal(t, []string{"ra"}, Done(msgs, resp), "only what the response does not list is deleted")
	require.Equal(t, []string{"ra", "rb"}, Done(msgs, events.SQSEventResponse{}))
}
