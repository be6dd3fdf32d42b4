package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/internal/sas"
)

// Renewal keeps good messages out of the dead-letter queue (docs/protocol.md,
// "Dead letters"). SQS counts every receive against the queue's
// maxReceiveCount, those of instances that died or timed out included, so a
// good message can reach the DLQ through bad luck alone. A message on one of
// its last two receives before that (MaxReceives-2 and after: two chances,
// since the instance renewing it may die too) is sent again as a fresh copy, whose count starts at 0, and the old one deleted at once (retire); the copy
// says how often it was renewed, and after MaxRenewals it is handled as it
// is, so a message that no handler can process still ends in the DLQ.
const (
	// DefaultMaxReceives is the construct's maxReceiveCount.
	DefaultMaxReceives = 5
	// MaxRenewals bounds the fresh copies of one message.
	MaxRenewals = 3
	// renewalsField carries the count in a renewed body. It is removed
	// before the body is read, so no message contract changes.
	renewalsField = "sasRenewals"
)

// renewals removes the renewal count from a body, returning both.
func renewals(body string) (int, string) {
	if !strings.Contains(body, renewalsField) {
		return 0, body
	}
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &m) != nil {
		return 0, body
	}
	raw, ok := m[renewalsField]
	if !ok {
		return 0, body
	}
	n, _ := strconv.Atoi(string(raw))
	delete(m, renewalsField)
	b, err := json.Marshal(m)
	if err != nil {
		return 0, body
	}
	return n, string(b)
}

// renew sends a fresh copy of rec to its queue when this receive is one of
// its last before the DLQ and it may still be renewed. It reports whether the
// copy went out, in which case rec is acknowledged unhandled.
func (h *Handler) renew(ctx context.Context, rec events.SQSMessage) bool {
	n, _ := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"])
	if n < max(h.svc.cfg.MaxReceives-2, 1) {
		return false
	}
	done, body := renewals(rec.Body)
	url := h.urls[sas.QueueName(rec.EventSourceARN)]
	if done >= MaxRenewals || url == "" {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &m) != nil {
		return false // not an object: nothing could handle it; let it go to the DLQ
	}
	m[renewalsField] = json.RawMessage(strconv.Itoa(done + 1))
	fresh, err := json.Marshal(m)
	if err != nil {
		return false
	}
	res, err := h.svc.cfg.Queue.Send(ctx, sas.SendParams{QueueURL: url, Messages: []sas.OutboundMessage{{ID: "0", Body: string(fresh)}}})
	if err == nil && len(res.Failed) > 0 {
		err = fmt.Errorf("%s: %s", res.Failed[0].Code, res.Failed[0].Message)
	}
	if err != nil {
		h.log.WarnContext(ctx, "could not renew a message on its last receive; it is handled as it is", "error", err)
		return false
	}
	h.log.InfoContext(ctx, "message renewed on its last receive before the dead-letter queue",
		"receives", n, "renewals", done+1)
	h.retire(ctx, url, rec)
	return true
}

// retire deletes a renewed message at once, rather than with the rest of
// its batch when the invocation returns: an invocation cut by its timeout
// (a slow batch) or its instance's death would otherwise leave the old
// message, whose copy is out, to its next receive, and after its last one
// to the dead-letter queue. A delete that fails leaves it to the event
// source, as before.
func (h *Handler) retire(ctx context.Context, url string, rec events.SQSMessage) {
	if rec.ReceiptHandle == "" {
		return
	}
	res, err := h.svc.cfg.Queue.Delete(ctx, sas.DeleteParams{QueueURL: url, Receipts: []string{rec.ReceiptHandle}})
	if err == nil && len(res.Failed) > 0 {
		err = fmt.Errorf("%s: %s", res.Failed[0].Code, res.Failed[0].Message)
	}
	if err != nil {
		h.log.WarnContext(ctx, "could not delete a renewed message; the event source deletes it when the batch ends", "error", err)
	}
}
