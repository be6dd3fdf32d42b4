package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// fakeAPI answers the calls a test sets; any other call panics (the nil
// embedded interface), which shows up as a test failure.
type fakeAPI struct {
	API
	sendOne   func(*sqs.SendMessageInput) (*sqs.SendMessageOutput, error)
	sendBatch func(*sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error)
	receive   func(*sqs.ReceiveMessageInput) (*sqs.ReceiveMessageOutput, error)
	delBatch  func(*sqs.DeleteMessageBatchInput) (*sqs.DeleteMessageBatchOutput, error)
	changeVis func(*sqs.ChangeMessageVisibilityInput) (*sqs.ChangeMessageVisibilityOutput, error)
}

func (f *fakeAPI) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return f.sendOne(in)
}

func (f *fakeAPI) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return f.sendBatch(in)
}

func (f *fakeAPI) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	return f.receive(in)
}

func (f *fakeAPI) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	return f.delBatch(in)
}

func (f *fakeAPI) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	return f.changeVis(in)
}

func apiErr(code, msg string, fault smithy.ErrorFault) error {
	return &smithy.GenericAPIError{Code: code, Message: msg, Fault: fault}
}

func outbound(n, size int) []sas.OutboundMessage {
	msgs := make([]sas.OutboundMessage, n)
	for i := range msgs {
		msgs[i] = sas.OutboundMessage{ID: fmt.Sprintf("m%d", i), Body: strings.Repeat("x", size)}
	}
	return msgs
}

// When a later batch fails as a whole, the earlier ones were sent: the call
// succeeds and lists exactly the messages not sent, as retryable.
func TestSendLaterBatchFails(t *testing.T) {
	t.Parallel()
	calls := 0
	api := &fakeAPI{sendBatch: func(in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		calls++
		if calls == 2 {
			return nil, apiErr("RequestThrottled", "slow down", smithy.FaultClient)
		}
		out := &sqs.SendMessageBatchOutput{}
		for _, e := range in.Entries {
			out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id})
		}
		return out, nil
	}}
	res, err := New(api).Send(t.Context(), sas.SendParams{QueueURL: "u", Messages: outbound(25, 1)})
	require.NoError(t, err)
	assert.Equal(t, 2, res.Requests, "it stops at the failed request")
	require.Len(t, res.Failed, 15)
	assert.Equal(t, "m10", res.Failed[0].ID)
	assert.Equal(t, "m24", res.Failed[14].ID)
	assert.Equal(t, "RequestThrottled", res.Failed[0].Code)
	assert.False(t, res.Failed[0].SenderFault, "throttling is worth a retry")
}

func TestSendFirstBatchFails(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{sendBatch: func(*sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		return nil, apiErr("AWS.SimpleQueueService.NonExistentQueue", "no queue", smithy.FaultClient)
	}}
	res, err := New(api).Send(t.Context(), sas.SendParams{QueueURL: "u", Messages: outbound(3, 1)})
	require.ErrorIs(t, err, sas.ErrNotFound)
	assert.Contains(t, err.Error(), "sending to u")
	assert.Empty(t, res.Failed, "nothing was sent, so the error says it all")
}

func TestSendBatchEntryResults(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{sendBatch: func(in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		require.Len(t, in.Entries, 3)
		assert.Equal(t, int32(2), in.Entries[1].DelaySeconds, "1.2 s rounds up to 2")
		return &sqs.SendMessageBatchOutput{
			Successful: []types.SendMessageBatchResultEntry{{Id: aws.String("0")}},
			Failed: []types.BatchResultErrorEntry{{
				Id: aws.String("1"), Code: aws.String("KmsThrottled"), Message: aws.String("later"), SenderFault: false,
			}},
			// Entry 2 reported neither way.
		}, nil
	}}
	msgs := outbound(3, 1)
	msgs[1].Delay = 1200 * time.Millisecond
	res, err := New(api).Send(t.Context(), sas.SendParams{QueueURL: "u", Messages: msgs})
	require.NoError(t, err)
	assert.Equal(t, []sas.SendFailure{
		{ID: "m1", Code: "KmsThrottled", Message: "later"},
		{ID: "m2", Code: "MissingResult", Message: "the service reported neither success nor failure"},
	}, res.Failed)
}

func TestSendOneServiceRefuses(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{sendOne: func(*sqs.SendMessageInput) (*sqs.SendMessageOutput, error) {
		return nil, &types.InvalidMessageContents{Message: aws.String("bad")}
	}}
	res, err := New(api).Send(t.Context(), sas.SendParams{QueueURL: "u", Messages: outbound(1, 1)})
	require.NoError(t, err, "a refused message is a failed entry, as in a batch")
	require.Len(t, res.Failed, 1)
	assert.Equal(t, sas.SendFailure{ID: "m0", Code: "InvalidMessageContents", Message: "bad", SenderFault: true}, res.Failed[0])
}

func TestDeleteBatchResults(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{delBatch: func(in *sqs.DeleteMessageBatchInput) (*sqs.DeleteMessageBatchOutput, error) {
		out := &sqs.DeleteMessageBatchOutput{}
		for _, e := range in.Entries {
			if aws.ToString(e.ReceiptHandle) == "bad" {
				out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), SenderFault: true})
				continue
			}
			out.Successful = append(out.Successful, types.DeleteMessageBatchResultEntry{Id: e.Id})
		}
		return out, nil
	}}
	receipts := make([]string, 12)
	for i := range receipts {
		receipts[i] = fmt.Sprint("r", i)
	}
	receipts[11] = "bad"
	res, err := New(api).Delete(t.Context(), sas.DeleteParams{QueueURL: "u", Receipts: receipts})
	require.NoError(t, err)
	assert.Equal(t, 2, res.Requests)
	assert.Equal(t, []sas.SendFailure{{ID: "bad", Code: "ReceiptHandleIsInvalid", SenderFault: true}}, res.Failed)
}

func TestReceiveInput(t *testing.T) {
	t.Parallel()
	var got *sqs.ReceiveMessageInput
	api := &fakeAPI{receive: func(in *sqs.ReceiveMessageInput) (*sqs.ReceiveMessageOutput, error) {
		got = in
		return &sqs.ReceiveMessageOutput{Messages: []types.Message{{
			MessageId: aws.String("id"), ReceiptHandle: aws.String("r"), Body: aws.String("b"),
			Attributes: map[string]string{"SentTimestamp": "1767323045000", "ApproximateReceiveCount": "3", "SenderId": "AROAEXAMPLE:sess"},
		}, {
			MessageId: aws.String("id2"), ReceiptHandle: aws.String("r2"), Body: aws.String("b2"),
		}}}, nil
	}}
	msgs, err := New(api).Receive(t.Context(), sas.ReceiveParams{QueueURL: "u", Wait: 1500 * time.Millisecond, Visibility: 30 * time.Second})
	require.NoError(t, err)
	assert.Equal(t, int32(1), got.MaxNumberOfMessages, "0 means 1")
	assert.Equal(t, int32(2), got.WaitTimeSeconds)
	assert.Equal(t, int32(30), got.VisibilityTimeout)
	assert.ElementsMatch(t, []types.MessageSystemAttributeName{"SentTimestamp", "ApproximateReceiveCount", "SenderId"}, got.MessageSystemAttributeNames)
	assert.Equal(t, []sas.InboundMessage{
		{MessageID: "id", Receipt: "r", Body: "b", ReceiveCount: 3, SentAt: time.UnixMilli(1767323045000).UTC(), SenderID: "AROAEXAMPLE:sess"},
		{MessageID: "id2", Receipt: "r2", Body: "b2"},
	}, msgs)
}

func TestErrorTranslation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"modelled not found", &types.QueueDoesNotExist{}, sas.ErrNotFound},
		{"query-compatible not found", apiErr("AWS.SimpleQueueService.NonExistentQueue", "", smithy.FaultClient), sas.ErrNotFound},
		// ElasticMQ's x-amzn-query-error header carries the shape id.
		{"shape id not found", apiErr("com.amazonaws.sqs#QueueDoesNotExist", "", smithy.FaultClient), sas.ErrNotFound},
		{"shape id invalid receipt", apiErr("com.amazonaws.sqs#ReceiptHandleIsInvalid", "", smithy.FaultClient), sas.ErrInvalid},
		{"invalid parameter", apiErr("InvalidParameterValue", "bad", smithy.FaultClient), sas.ErrInvalid},
		{"batch too long", apiErr("AWS.SimpleQueueService.BatchRequestTooLong", "", smithy.FaultClient), sas.ErrInvalid},
		{"throttled stays itself", apiErr("RequestThrottled", "", smithy.FaultClient), nil},
	} {
		got := translate(tc.err)
		assert.ErrorIs(t, got, tc.err, tc.name)
		if tc.want != nil {
			assert.ErrorIs(t, got, tc.want, tc.name)
		} else {
			assert.NotErrorIs(t, got, sas.ErrInvalid, tc.name)
			assert.NotErrorIs(t, got, sas.ErrNotFound, tc.name)
		}
	}
}

func TestChangeVisibilityStaleReceipt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		// What SQS answers for a receipt superseded by a later receive.
		{"superseded", apiErr("InvalidParameterValue",
			"Value AQEB for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.",
			smithy.FaultClient), sas.ErrLostRace},
		{"not in flight", &types.MessageNotInflight{}, sas.ErrLostRace},
		{"malformed", &types.ReceiptHandleIsInvalid{}, sas.ErrInvalid},
		{"other invalid parameter", apiErr("InvalidParameterValue", "VisibilityTimeout too large", smithy.FaultClient), sas.ErrInvalid},
	} {
		api := &fakeAPI{changeVis: func(*sqs.ChangeMessageVisibilityInput) (*sqs.ChangeMessageVisibilityOutput, error) {
			return nil, tc.err
		}}
		err := New(api).ChangeVisibility(t.Context(), sas.ChangeVisibilityParams{QueueURL: "u", Receipt: "r", Timeout: time.Second})
		assert.ErrorIs(t, err, tc.want, tc.name)
		assert.ErrorIs(t, err, tc.err, tc.name)
		if tc.want == sas.ErrLostRace {
			assert.NotErrorIs(t, err, sas.ErrInvalid, tc.name)
		}
	}
}

func TestNetworkErrorIsNotTranslated(t *testing.T) {
	t.Parallel()
	down := errors.New("connection refused")
	api := &fakeAPI{sendOne: func(*sqs.SendMessageInput) (*sqs.SendMessageOutput, error) { return nil, down }}
	_, err := New(api).Send(t.Context(), sas.SendParams{QueueURL: "u", Messages: outbound(1, 1)})
	require.ErrorIs(t, err, down)
	assert.NotErrorIs(t, err, sas.ErrInvalid)
}

// A message whose body carries a valid trace goes with the AWSTraceHeader
// system attribute derived from it, alone or in a batch; one without a
// trace, with one that is not valid, or whose body is not a JSON object,
// goes without (and is sent all the same). A "trace" inside the payload is
// not the message's.
func TestSendSetsTheTraceHeader(t *testing.T) {
	t.Parallel()
	const tr = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	const want = "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1"
	bodies := []string{
		`{"v":1,"kind":"agent.reply","orderId":"o-1","trace":"` + tr + `"}`,
		`{"v":1,"kind":"agent.reply","orderId":"o-1"}`,
		`{"v":1,"kind":"agent.reply","orderId":"o-1","trace":"00-not-a-trace"}`,
		`{"v":1,"orderId":"o-1","payload":{"trace":"` + tr + `"}}`,
		`not json`,
		`["` + tr + `"]`,
	}
	header := func(attrs map[string]types.MessageSystemAttributeValue) string {
		if attrs == nil {
			return ""
		}
		v := attrs["AWSTraceHeader"]
		assert.Equal(t, "String", aws.ToString(v.DataType))
		return aws.ToString(v.StringValue)
	}
	var one []string
	api := &fakeAPI{
		sendOne: func(in *sqs.SendMessageInput) (*sqs.SendMessageOutput, error) {
			one = append(one, header(in.MessageSystemAttributes))
			return &sqs.SendMessageOutput{}, nil
		},
		sendBatch: func(in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
			out := &sqs.SendMessageBatchOutput{}
			var got []string
			for _, e := range in.Entries {
				got = append(got, header(e.MessageSystemAttributes))
				out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id})
			}
			assert.Equal(t, []string{want, "", "", "", "", ""}, got)
			return out, nil
		},
	}
	q := New(api)
	var msgs []sas.OutboundMessage
	for i, b := range bodies {
		msgs = append(msgs, sas.OutboundMessage{ID: fmt.Sprint(i), Body: b})
		res, err := q.Send(t.Context(), sas.SendParams{QueueURL: "u", Messages: []sas.OutboundMessage{{ID: "m", Body: b}}})
		require.NoError(t, err)
		require.Empty(t, res.Failed)
	}
	assert.Equal(t, []string{want, "", "", "", "", ""}, one)
	res, err := q.Send(t.Context(), sas.SendParams{QueueURL: "u", Messages: msgs})
	require.NoError(t, err)
	require.Empty(t, res.Failed)
}
