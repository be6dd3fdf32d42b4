// Package sqsevent is what a Lambda SQS event source mapping does around
// a handler, for the code that plays it outside Lambda (the local runtime's
// pollers, the agent SDK polling its own queues, the test kit): received
// messages become one SQS event, and with ReportBatchItemFailures every
// message the response does not list as failed is deleted.
package sqsevent

import (
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/internal/sas"
)

// Event is the SQS event Lambda would hand a function for msgs, received
// from the queue whose ARN is arn: message id, receipt, body, source ARN,
// and the attributes the handlers read (receive count, sent time).
func Event(arn string, msgs []sas.InboundMessage) events.SQSEvent {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(msgs))}
	for i, m := range msgs {
		ev.Records[i] = events.SQSMessage{
			MessageId: m.MessageID, ReceiptHandle: m.Receipt, Body: m.Body,
			EventSource: "aws:sqs", EventSourceARN: arn,
			Attributes: map[string]string{
				// A received message has been received at least once.
				"ApproximateReceiveCount": strconv.Itoa(max(m.ReceiveCount, 1)),
				"SentTimestamp":           strconv.FormatInt(m.SentAt.UnixMilli(), 10),
			},
		}
	}
	return ev
}

// Failed is the set of message ids a response lists as failed.
func Failed(resp events.SQSEventResponse) map[string]bool {
	failed := make(map[string]bool, len(resp.BatchItemFailures))
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	return failed
}

// Done returns the receipts of the messages the response does not list as
// failed: those the event source deletes.
func Done(msgs []sas.InboundMessage, resp events.SQSEventResponse) []string {
	failed := Failed(resp)
	receipts := make([]string, 0, len(msgs))
	for _, m := range msgs {
		if !failed[m.MessageID] {
			receipts = append(receipts, m.Receipt)
		}
	}
	return receipts
}

// SentAt is when rec was sent, from SQS's SentTimestamp attribute (the one
// Event sets); zero when the attribute is missing or not a time.
func SentAt(rec events.SQSMessage) time.Time {
	ms, err := strconv.ParseInt(rec.Attributes["SentTimestamp"], 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
