// Package sqsqueue implements sas.Queue on Amazon SQS (standard queues).
//
// Send and Delete follow one rule for partial failure: a non-nil error means
// no request went through (resend the lot; if the error came after the
// request left, SQS may have acted on it, which at-least-once consumers
// absorb); otherwise every entry not listed in the result's Failed went
// through, and a Failed entry without SenderFault is worth resending. A
// message that can never be sent (empty, too large, characters SQS refuses,
// delay beyond 15 minutes) is caught before the call and reported in Failed
// with SenderFault, so it never fails the batch it would have shared with
// good messages. Call-level mistakes (no queue URL, empty or repeated IDs,
// out-of-range Receive or ChangeVisibility parameters) are errors wrapping
// sas.ErrInvalid; a missing queue wraps sas.ErrNotFound.
//
// A message whose body is a JSON object with a valid "trace" (a W3C
// traceparent: every message about an order has one) is sent with SQS's
// AWSTraceHeader system attribute derived from it (sas.XRayTraceHeader), so
// that X-Ray joins the invocations of one order into one trace
// (docs/observability.md, "X-Ray"). Any other body is sent without it.
package sqsqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sqslimits"
)

// API is the part of the SQS client the adapter uses; *sqs.Client satisfies
// it, and unit tests substitute their own.
type API interface {
	SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	CreateQueue(context.Context, *sqs.CreateQueueInput, ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	DeleteQueue(context.Context, *sqs.DeleteQueueInput, ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error)
}

var (
	_ API             = (*sqs.Client)(nil)
	_ sas.Queue       = (*Queue)(nil)
	_ sas.DepthReader = (*Queue)(nil)
)

// Queue is the SQS adapter. It holds no state besides the client and is safe
// for concurrent use.
type Queue struct {
	api API
}

// New returns an adapter over an SQS client (sqs.NewFromConfig(cfg)).
func New(api API) *Queue {
	return &Queue{api: api}
}

// receiveAttributes are the system attributes Receive asks for. The receive
// count is informational only: emulators do not report it reliably (docs/pattern.md §7).
var receiveAttributes = []types.MessageSystemAttributeName{
	types.MessageSystemAttributeNameSentTimestamp,
	types.MessageSystemAttributeNameApproximateReceiveCount,
	types.MessageSystemAttributeNameSenderId,
}

// Send sends with SendMessage for one message and SendMessageBatch otherwise.
// A Delay of 0 leaves the queue's own delay in force (the SDK omits zero).
func (q *Queue) Send(ctx context.Context, p sas.SendParams) (sas.SendResult, error) {
	var res sas.SendResult
	if p.QueueURL == "" {
		return res, fmt.Errorf("sending: %w", &sas.ValidationError{Field: "QueueURL", Reason: "empty"})
	}
	valid, failed, err := sqslimits.CheckSend(p.Messages)
	if err != nil {
		return res, fmt.Errorf("sending to %s: %w", p.QueueURL, err)
	}
	res.Failed = failed
	switch len(valid) {
	case 0:
		return res, nil
	case 1:
		return q.sendOne(ctx, p.QueueURL, valid[0], res)
	}
	batches := sqslimits.Chunks(valid)
	for i, batch := range batches {
		failed, err := q.sendBatch(ctx, p.QueueURL, batch)
		res.Requests++
		if err != nil {
			if i == 0 {
				return sas.SendResult{Requests: res.Requests}, fmt.Errorf("sending to %s: %w", p.QueueURL, translate(err))
			}
			// Earlier batches went out: report this one and the rest as not
			// sent, so the caller resends only those.
			for _, rest := range batches[i:] {
				for _, m := range rest {
					res.Failed = append(res.Failed, failure(m.ID, err))
				}
			}
			return res, nil
		}
		res.Failed = append(res.Failed, failed...)
	}
	return res, nil
}

func (q *Queue) sendOne(ctx context.Context, url string, m sas.OutboundMessage, res sas.SendResult) (sas.SendResult, error) {
	in := &sqs.SendMessageInput{
		QueueUrl:                aws.String(url),
		MessageBody:             aws.String(m.Body),
		DelaySeconds:            int32(sqslimits.Seconds(m.Delay)),
		MessageSystemAttributes: systemAttributes(m.Body),
	}
	_, err := q.api.SendMessage(ctx, in)
	res.Requests++
	switch {
	case err == nil:
	case perMessage(err):
		res.Failed = append(res.Failed, failure(m.ID, err))
	default:
		return sas.SendResult{Requests: res.Requests}, fmt.Errorf("sending to %s: %w", url, translate(err))
	}
	return res, nil
}

// sendBatch sends one batch; entry ids are positions, mapped back to the
// caller's IDs, so those need only be unique, not SQS-shaped.
func (q *Queue) sendBatch(ctx context.Context, url string, batch []sas.OutboundMessage) ([]sas.SendFailure, error) {
	entries := make([]types.SendMessageBatchRequestEntry, len(batch))
	for i, m := range batch {
		entries[i] = types.SendMessageBatchRequestEntry{
			Id:                      aws.String(strconv.Itoa(i)),
			MessageBody:             aws.String(m.Body),
			DelaySeconds:            int32(sqslimits.Seconds(m.Delay)),
			MessageSystemAttributes: systemAttributes(m.Body),
		}
	}
	out, err := q.api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(batch))
	for i, m := range batch {
		ids[i] = m.ID
	}
	ok := make([]*string, len(out.Successful))
	for i, e := range out.Successful {
		ok[i] = e.Id
	}
	return batchFailures(ids, ok, out.Failed), nil
}

// awsTraceHeader is the message system attribute X-Ray reads a trace from.
const awsTraceHeader = string(types.MessageSystemAttributeNameForSendsAWSTraceHeader)

// systemAttributes are the system attributes a message is sent with: its
// AWSTraceHeader when its body carries a valid trace context, else none.
// Only the top level's "trace" is read (a payload's own is not the
// order's). Its size does not count against the message's (SQS).
func systemAttributes(body string) map[string]types.MessageSystemAttributeValue {
	var m struct {
		Trace string `json:"trace"`
	}
	if json.Unmarshal([]byte(body), &m) != nil {
		return nil
	}
	h := sas.XRayTraceHeader(m.Trace)
	if h == "" {
		return nil
	}
	return map[string]types.MessageSystemAttributeValue{
		awsTraceHeader: {DataType: aws.String("String"), StringValue: aws.String(h)},
	}
}

// batchFailures maps a batch's results back to the caller's IDs (entry ids
// are positions in ids). An entry the service reported neither way counts as
// failed, retryably: calling it sent could lose it.
func batchFailures(ids []string, successful []*string, failed []types.BatchResultErrorEntry) []sas.SendFailure {
	done := make([]bool, len(ids))
	position := func(id *string) (int, bool) {
		i, err := strconv.Atoi(aws.ToString(id))
		return i, err == nil && i >= 0 && i < len(ids) && !done[i]
	}
	var out []sas.SendFailure
	for _, f := range failed {
		if i, ok := position(f.Id); ok {
			done[i] = true
			out = append(out, sas.SendFailure{
				ID:          ids[i],
				Code:        aws.ToString(f.Code),
				Message:     aws.ToString(f.Message),
				SenderFault: f.SenderFault,
			})
		}
	}
	for _, id := range successful {
		if i, ok := position(id); ok {
			done[i] = true
		}
	}
	for i, ok := range done {
		if !ok {
			out = append(out, sas.SendFailure{ID: ids[i], Code: "MissingResult", Message: "the service reported neither success nor failure"})
		}
	}
	return out
}

// Receive receives up to p.Max messages (0 means 1, as SQS). A Wait of 0 is
// omitted by the SDK, so the queue's ReceiveMessageWaitTimeSeconds applies;
// the queues this system creates leave it at 0.
func (q *Queue) Receive(ctx context.Context, p sas.ReceiveParams) ([]sas.InboundMessage, error) {
	if p.QueueURL == "" {
		return nil, fmt.Errorf("receiving: %w", &sas.ValidationError{Field: "QueueURL", Reason: "empty"})
	}
	in, err := receiveInput(p)
	if err != nil {
		return nil, fmt.Errorf("receiving from %s: %w", p.QueueURL, err)
	}
	out, err := q.api.ReceiveMessage(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("receiving from %s: %w", p.QueueURL, translate(err))
	}
	msgs := make([]sas.InboundMessage, 0, len(out.Messages))
	for _, m := range out.Messages {
		msgs = append(msgs, inbound(m))
	}
	return msgs, nil
}

func receiveInput(p sas.ReceiveParams) (*sqs.ReceiveMessageInput, error) {
	r, err := sqslimits.CheckReceive(p)
	if err != nil {
		return nil, err
	}
	return &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(p.QueueURL),
		MaxNumberOfMessages:         r.Max,
		WaitTimeSeconds:             r.WaitSeconds,
		VisibilityTimeout:           r.VisibilitySeconds,
		MessageSystemAttributeNames: receiveAttributes,
	}, nil
}

func inbound(m types.Message) sas.InboundMessage {
	msg := sas.InboundMessage{
		MessageID: aws.ToString(m.MessageId),
		Receipt:   aws.ToString(m.ReceiptHandle),
		Body:      aws.ToString(m.Body),
	}
	// Attributes are informational; a missing or odd one is left zero.
	if n, err := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)]); err == nil {
		msg.ReceiveCount = n
	}
	if ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
		msg.SentAt = time.UnixMilli(ms).UTC()
	}
	msg.SenderID = m.Attributes[string(types.MessageSystemAttributeNameSenderId)]
	return msg
}

// Delete deletes with DeleteMessage for one receipt and DeleteMessageBatch, in
// batches of 10, otherwise. A receipt SQS cannot parse is reported in Failed
// (ID is the receipt). A superseded receipt (the message was received again
// since) is accepted by SQS, which "might not" delete the message: the
// consumer must be idempotent either way.
func (q *Queue) Delete(ctx context.Context, p sas.DeleteParams) (sas.DeleteResult, error) {
	var res sas.DeleteResult
	if p.QueueURL == "" {
		return res, fmt.Errorf("deleting: %w", &sas.ValidationError{Field: "QueueURL", Reason: "empty"})
	}
	receipts, failed := sqslimits.CheckReceipts(p.Receipts)
	res.Failed = failed
	switch len(receipts) {
	case 0:
		return res, nil
	case 1:
		_, err := q.api.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(p.QueueURL), ReceiptHandle: aws.String(receipts[0])})
		res.Requests++
		switch {
		case err == nil:
		case perMessage(err):
			res.Failed = append(res.Failed, failure(receipts[0], err))
		default:
			return sas.DeleteResult{Requests: res.Requests}, fmt.Errorf("deleting from %s: %w", p.QueueURL, translate(err))
		}
		return res, nil
	}
	batches := sqslimits.ReceiptChunks(receipts)
	for i, batch := range batches {
		entries := make([]types.DeleteMessageBatchRequestEntry, len(batch))
		for j, r := range batch {
			entries[j] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), ReceiptHandle: aws.String(r)}
		}
		out, err := q.api.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.QueueURL), Entries: entries})
		res.Requests++
		if err != nil {
			if i == 0 {
				return sas.DeleteResult{Requests: res.Requests}, fmt.Errorf("deleting from %s: %w", p.QueueURL, translate(err))
			}
			for _, rest := range batches[i:] {
				for _, r := range rest {
					res.Failed = append(res.Failed, failure(r, err))
				}
			}
			return res, nil
		}
		ok := make([]*string, len(out.Successful))
		for j, e := range out.Successful {
			ok[j] = e.Id
		}
		res.Failed = append(res.Failed, batchFailures(batch, ok, out.Failed)...)
	}
	return res, nil
}

// ChangeVisibility sets how long the message stays hidden from now on; 0
// makes it visible at once. An error that errors.Is sas.ErrLostRace means the
// caller no longer holds the message (another consumer received it since, or
// it is gone): stop working on it and do not retry.
func (q *Queue) ChangeVisibility(ctx context.Context, p sas.ChangeVisibilityParams) error {
	if p.QueueURL == "" {
		return fmt.Errorf("changing visibility: %w", &sas.ValidationError{Field: "QueueURL", Reason: "empty"})
	}
	if p.Receipt == "" {
		return fmt.Errorf("changing visibility in %s: %w", p.QueueURL, &sas.ValidationError{Field: "Receipt", Reason: "empty"})
	}
	timeout, err := sqslimits.CheckSeconds("Timeout", p.Timeout, sqslimits.MaxVisibility)
	if err != nil {
		return fmt.Errorf("changing visibility in %s: %w", p.QueueURL, err)
	}
	_, err = q.api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl:          aws.String(p.QueueURL),
		ReceiptHandle:     aws.String(p.Receipt),
		VisibilityTimeout: timeout,
	})
	switch {
	case err == nil:
		return nil
	case staleReceipt(err):
		return fmt.Errorf("changing visibility in %s: %w: %w", p.QueueURL, sas.ErrLostRace, err)
	}
	return fmt.Errorf("changing visibility in %s: %w", p.QueueURL, translate(err))
}
