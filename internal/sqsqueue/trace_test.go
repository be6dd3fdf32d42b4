package sqsqueue_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/dev/rig"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sqsqueue"
	"github.com/sas-go/sas/internal/testkit/emulator"
)

// batchTraceHeaderQuirks: measured with this test (MiniStack: `rig
// ministack`, then this test with AWS_ENDPOINT_URL and
// SAS_EMULATOR_NAME=ministack-1.5.33). Real SQS and ElasticMQ keep it.
var batchTraceHeaderQuirks = map[string]string{
	rig.SQSMoto: "moto 5.2.5 accepts AWSTraceHeader in SendMessageBatch but does not keep it (it keeps it from SendMessage)",
	"ministack": "MiniStack 1.5.33 accepts AWSTraceHeader in SendMessageBatch but does not keep it (it keeps it from SendMessage)",
}

// TestTraceHeaderOnTheEmulator sends messages about an order, alone and in a
// batch, and receives them with their AWSTraceHeader: the emulator takes
// the system attribute (a send with it does not fail) and gives back the
// order's trace. ElasticMQ 1.7.1 keeps it both ways; moto 5.2.5 and
// MiniStack 1.5.33 keep it from SendMessage only.
func TestTraceHeaderOnTheEmulator(t *testing.T) {
	t.Parallel()
	cfg := emulator.Require(t)
	clients := map[string]*sqs.Client{emulator.Name(): sqs.NewFromConfig(cfg)}
	extra, err := rig.ParseExtraSQS(os.Getenv(rig.EnvSQSExtra))
	require.NoError(t, err)
	for emu, endpoint := range extra {
		clients[emu] = sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
	}
	for name, client := range clients {
		t.Run(backendName(name), func(t *testing.T) {
			q := sqsqueue.New(client)
			created, err := q.CreateQueue(t.Context(), sas.CreateQueueParams{Name: emulator.UniqueName(t, "trace")})
			require.NoError(t, err)
			t.Cleanup(func() { _ = q.DeleteQueue(context.Background(), created.URL) })

			trace := sas.NewTrace("o-trace", time.Now())
			body := func(i int) string {
				return sas.Encode(sas.Status{V: sas.MessageVersion, Kind: sas.KindStatus, OrderID: fmt.Sprintf("o-%d", i), Status: sas.StatusReceived,
					Trace: sas.ChildTrace(trace, fmt.Sprint(i))})
			}
			untraced := sas.Encode(sas.Status{V: sas.MessageVersion, Kind: sas.KindStatus, OrderID: "o-none", Status: sas.StatusReceived})
			res, err := q.Send(t.Context(), sas.SendParams{QueueURL: created.URL, Messages: []sas.OutboundMessage{{ID: "one", Body: body(0)}}})
			require.NoError(t, err)
			require.Empty(t, res.Failed)
			res, err = q.Send(t.Context(), sas.SendParams{QueueURL: created.URL, Messages: []sas.OutboundMessage{
				{ID: "b1", Body: body(1)}, {ID: "b2", Body: body(2)}, {ID: "none", Body: untraced}}})
			require.NoError(t, err)
			require.Empty(t, res.Failed)

			got := map[string]string{} // order id → the traceparent of its AWSTraceHeader
			for deadline := time.Now().Add(10 * time.Second); len(got) < 4 && time.Now().Before(deadline); {
				out, err := client.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(created.URL), MaxNumberOfMessages: 10,
					MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAWSTraceHeader}})
				require.NoError(t, err)
				for _, m := range out.Messages {
					h, err := sas.DecodeHeader([]byte(aws.ToString(m.Body)))
					require.NoError(t, err)
					got[h.OrderID] = sas.TraceFromXRayHeader(m.Attributes["AWSTraceHeader"])
				}
			}
			require.Len(t, got, 4)
			require.Equal(t, sas.ChildTrace(trace, "0"), got["o-0"], "SendMessage")
			require.Empty(t, got["o-none"], "a message without a trace has no header")
			for emu, quirk := range batchTraceHeaderQuirks {
				if strings.Contains(name, emu) {
					t.Logf("quirk: %s", quirk)
					return
				}
			}
			require.Equal(t, sas.ChildTrace(trace, "1"), got["o-1"], "SendMessageBatch")
			require.Equal(t, sas.ChildTrace(trace, "2"), got["o-2"], "SendMessageBatch")
		})
	}
}
