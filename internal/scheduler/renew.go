package scheduler

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sizing"
)

// Renewal keeps good messages out of the dead-letter queue (docs/protocol.md,
// "Dead letters"). SQS counts every receive against the queue's
// maxReceiveCount, those of instances that died or timed out included, so a
// good message can reach the DLQ through bad luck alone. A message on its
// third receive or any later one (RenewFrom: sizing.RenewFromReceive, or
// MaxReceives-2 for a queue that allows fewer than five), on any queue the
// scheduler reads (intake, scheduler, control), is sent again as a fresh
// copy, whose count starts at 0, and the old one deleted at once (retire):
// with the construct's ten receives, eight chances, since the instance
// renewing it may die too, and a receive may never reach a handler; the copy
// says how often it was renewed, and after MaxRenewals it is handled as it
// is, so a message that no handler can process still ends in the DLQ.
//
// The count is the scheduler's own note, signed with its key over the
// count and the rest of the body: a sender cannot set it (issue 29, F-8: a
// count read as the message said let a sender write -1000000 and renew a
// failing message for ever). A message that carries a count without the
// scheduler's signature (forged, or from a build before the signature) is
// renewed no more; one with no count is a first copy.
const (
	// DefaultMaxReceives is the construct's maxReceiveCount.
	DefaultMaxReceives = sizing.MaxReceiveCount
	// MaxRenewals bounds the fresh copies of one message.
	MaxRenewals = 3
	// renewalsField carries the count in a renewed body, and
	// renewalSigField its signature. Both are removed before the body is
	// read, so no message contract changes.
	renewalsField   = "sasRenewals"
	renewalSigField = "sasRenewalSig"
	// renewalSenderField keeps, in a renewed copy, who sent the message
	// first (SQS's SenderId), signed with the count: the copy's own sender
	// is the scheduler, and a compensate's actor is who asked for it.
	renewalSenderField = "sasSender"
	// renewalPurpose labels the signature (sas.Signer.SignBytes).
	renewalPurpose = "renewal"
)

// renewal is what a body says of its renewals, once the scheduler checked
// it: how often it was renewed, and who sent it first ("" when unknown).
type renewal struct {
	count  int
	sender string
}

// renewals removes the renewal fields from a body, returning the body as
// read and what the scheduler vouches for (see above): a count of 0 for a
// body without one, MaxRenewals (and no sender) for one it did not sign.
func (s *Service) renewals(body string) (renewal, string) {
	if !strings.Contains(body, renewalsField) {
		return renewal{}, body
	}
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &m) != nil {
		return renewal{}, body
	}
	raw, ok := m[renewalsField]
	if !ok {
		return renewal{}, body
	}
	var sig, sender string
	_ = json.Unmarshal(m[renewalSigField], &sig)
	_ = json.Unmarshal(m[renewalSenderField], &sender)
	delete(m, renewalsField)
	delete(m, renewalSigField)
	delete(m, renewalSenderField)
	b, err := json.Marshal(m) // keys sorted: the form the signature was made on
	if err != nil {
		return renewal{}, body
	}
	n, err := strconv.Atoi(string(raw))
	r := renewal{count: n, sender: sender}
	if err != nil || n < 0 || n > MaxRenewals || s.signer.VerifyBytes(renewalPurpose, renewalNote(r, b), sig) != nil {
		return renewal{count: MaxRenewals}, string(b)
	}
	return r, string(b)
}

// RenewFrom is the first receive on which a message of a queue that allows
// maxReceives receives is renewed: sizing.RenewFromReceive, so that a
// message is handled twice before, and earlier on a queue whose redrive
// policy leaves fewer than three receives after that (never before its
// first).
func RenewFrom(maxReceives int) int {
	return max(min(sizing.RenewFromReceive, maxReceives-2), 1)
}

// renewalNote is what a renewal's signature covers: the count, the first
// sender and the body it was made for (without the renewal fields).
func renewalNote(r renewal, body []byte) []byte {
	return fmt.Appendf(nil, "%d\n%d:%s\n%s", r.count, len(r.sender), r.sender, body)
}

// renew sends a fresh copy of rec to its queue when this receive is one of
// its last before the DLQ and it may still be renewed. It reports whether the
// copy went out, in which case rec is acknowledged unhandled.
func (h *Handler) renew(ctx context.Context, rec events.SQSMessage) bool {
	n, _ := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"])
	if n < RenewFrom(h.svc.cfg.MaxReceives) {
		return false
	}
	was, body := h.svc.renewals(rec.Body)
	url := h.urls[sas.QueueName(rec.EventSourceARN)]
	if was.count >= MaxRenewals || url == "" {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &m) != nil {
		return false // not an object: nothing could handle it; let it go to the DLQ
	}
	canon, err := json.Marshal(m)
	if err != nil {
		return false
	}
	next := renewal{count: was.count + 1, sender: cmp.Or(was.sender, rec.Attributes["SenderId"])}
	sig, _ := json.Marshal(h.svc.signer.SignBytes(renewalPurpose, renewalNote(next, canon)))
	sender, _ := json.Marshal(next.sender)
	m[renewalsField] = json.RawMessage(strconv.Itoa(next.count))
	m[renewalSigField] = sig
	if next.sender != "" {
		m[renewalSenderField] = sender
	}
	fresh, err := json.Marshal(m)
	if err != nil {
		return false
	}
	res, err := h.svc.cfg.Queue.Send(ctx, sas.SendParams{QueueURL: url, Messages: []sas.OutboundMessage{{ID: "0", Body: string(fresh)}}})
	if err == nil && len(res.Failed) > 0 {
		err = fmt.Errorf("%s: %s", res.Failed[0].Code, res.Failed[0].Message)
	}
	if err != nil {
		h.log.WarnContext(ctx, "could not renew a message before the dead-letter queue; it is handled as it is", "err", err)
		return false
	}
	h.log.InfoContext(ctx, "message renewed before the dead-letter queue",
		"receives", n, "renewals", next.count)
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
		h.log.WarnContext(ctx, "could not delete a renewed message; the event source deletes it when the batch ends", "err", err)
	}
}
