// Package sqslimits holds the limits SQS puts on a request and the checks
// and batching both queue adapters apply before a call: internal/sqsqueue,
// so that a message that can never be sent is reported alone instead of
// failing the request it shares with others (SQS fails a whole batch that is
// too long), and internal/memqueue, so that a test's failures and request
// counts are what SQS would give. Adapters do not import each other; both
// import this.
package sqslimits

import (
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/sas-go/sas/internal/sas"
)

const (
	// MaxBatchEntries is the most entries one SendMessageBatch or
	// DeleteMessageBatch request may carry, and the most messages one
	// ReceiveMessage returns.
	MaxBatchEntries = 10
	// MaxBodyBytes is the largest body we send, and MaxBatchBytes the most body
	// bytes in one batch. SQS raised both to 1 MiB in 2025, but queues created
	// earlier, LocalStack and ElasticMQ keep 256 KiB: we hold to what every
	// backend accepts, and the stack sets its queues' MaximumMessageSize to
	// exactly this (infra/sascdk/sascdk.go), so the code and the queues agree.
	MaxBodyBytes  = 256 * 1024
	MaxBatchBytes = 256 * 1024
	// MaxDelay, MaxWait and MaxVisibility bound DelaySeconds, WaitTimeSeconds
	// and VisibilityTimeout.
	MaxDelay      = 15 * time.Minute
	MaxWait       = 20 * time.Second
	MaxVisibility = 12 * time.Hour
	// DefaultVisibility is a queue's visibility timeout unless set.
	DefaultVisibility = 30 * time.Second
)

// The size of every message about an order (docs/protocol.md, "Sizes"):
// whatever intake accepts, every later message fits. The bounds on what the
// submitter sends are the domain's (sas.MaxPayloadBytes, sas.MaxReplyToBytes,
// the 128-byte order id); the rest is the pipeline's own.
const (
	// MaxResultBytes bounds the step's result an agent.reply carries,
	// compacted (sas.MaxResultBytes). A larger one is never carried: the
	// step fails, named sas.ErrorResultTooLarge, and its effect is undone.
	MaxResultBytes = sas.MaxResultBytes
	// MaxReasonBytes bounds a failed reply's reason before encoding; JSON
	// may write a control character in six bytes.
	MaxReasonBytes = 1000
	// fixedFieldBytes bounds the rest of an envelope: field names, version
	// and kind, the order id (128), idempotency key (255), holder id, step,
	// agent and workflow names (a registry's), deadline, counters.
	fixedFieldBytes = 4 << 10
	// MaxEnvelopeOverheadBytes is the most any message about an order adds
	// to its payload: an agent.request, or an agent.reply with the largest
	// result or reason.
	MaxEnvelopeOverheadBytes = fixedFieldBytes + sas.MaxReplyToBytes + 6*MaxReasonBytes + MaxResultBytes
	// MaxOrderMessageBytes is the most any message about an order takes:
	// its payload, the results of its steps (an agent.request carries those
	// its step follows, a processed status all; sas.MaxOrderResultsBytes)
	// and the envelope.
	MaxOrderMessageBytes = sas.MaxPayloadBytes + sas.MaxOrderResultsBytes + MaxEnvelopeOverheadBytes
)

// The derivation, checked by the compiler: a negative constant does not
// convert to uint, so raising the payload limit past what a message can
// carry fails the build, not an order.
const _ = uint(MaxBodyBytes - MaxOrderMessageBytes)

// Codes of the failures the adapters report themselves, named as SQS names
// them.
const (
	CodeInvalidParameter = "InvalidParameterValue"
	CodeInvalidContents  = "InvalidMessageContents"
	CodeInvalidReceipt   = "ReceiptHandleIsInvalid"
)

// Seconds turns a duration into the whole seconds SQS takes, rounding up: a
// caller who asks for 1.5 s of visibility wants at least that.
func Seconds(d time.Duration) int64 {
	return int64(math.Ceil(d.Seconds()))
}

// CheckSeconds validates a duration parameter against [0, limit] and returns
// it in whole seconds, rounded up.
func CheckSeconds(field string, d, limit time.Duration) (int32, error) {
	if d < 0 || Seconds(d) > Seconds(limit) {
		return 0, &sas.ValidationError{Field: field, Reason: fmt.Sprintf("%s is outside 0..%s", d, limit)}
	}
	return int32(Seconds(d)), nil
}

// CheckMessage returns the failure SQS would report for a message that can
// never be sent, or nil.
func CheckMessage(m sas.OutboundMessage) *sas.SendFailure {
	fail := func(code, format string, args ...any) *sas.SendFailure {
		return &sas.SendFailure{ID: m.ID, Code: code, Message: fmt.Sprintf(format, args...), SenderFault: true}
	}
	switch {
	case m.Body == "":
		return fail(CodeInvalidParameter, "message body is empty")
	case len(m.Body) > MaxBodyBytes:
		return fail(CodeInvalidParameter, "message body is %d bytes, more than %d", len(m.Body), MaxBodyBytes)
	case m.Delay < 0 || Seconds(m.Delay) > Seconds(MaxDelay):
		return fail(CodeInvalidParameter, "delay %s is outside 0..%s", m.Delay, MaxDelay)
	}
	if r, at, ok := firstInvalidRune(m.Body); !ok {
		return fail(CodeInvalidContents, "message body has character %U at byte %d, which SQS does not accept", r, at)
	}
	return nil
}

// firstInvalidRune finds the first character outside what SQS accepts in a
// body (#x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF), or a
// byte that is not UTF-8.
func firstInvalidRune(s string) (rune, int, bool) {
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return r, i, false
			}
		case r == 0x9 || r == 0xA || r == 0xD:
		case r >= 0x20 && r <= 0xD7FF:
		case r >= 0xE000 && r <= 0xFFFD:
		case r >= 0x10000 && r <= 0x10FFFF:
		default:
			return r, i, false
		}
	}
	return 0, 0, true
}

// CheckIDs requires every message to have a non-empty ID unique within the
// Send: a failure is reported by ID, so an ambiguous one could not be told apart.
func CheckIDs(msgs []sas.OutboundMessage) error {
	seen := make(map[string]bool, len(msgs))
	for i, m := range msgs {
		if m.ID == "" {
			return &sas.ValidationError{Field: fmt.Sprintf("Messages[%d].ID", i), Reason: "empty"}
		}
		if seen[m.ID] {
			return &sas.ValidationError{Field: fmt.Sprintf("Messages[%d].ID", i), Reason: fmt.Sprintf("%q is used twice", m.ID)}
		}
		seen[m.ID] = true
	}
	return nil
}

// CheckSend sorts the messages of one Send: an error when their IDs are
// missing or repeated (the whole call is invalid), else those that can be
// sent, in order, and a failure for each that never can.
func CheckSend(msgs []sas.OutboundMessage) (valid []sas.OutboundMessage, failed []sas.SendFailure, err error) {
	if err := CheckIDs(msgs); err != nil {
		return nil, nil, err
	}
	valid = make([]sas.OutboundMessage, 0, len(msgs))
	for _, m := range msgs {
		if f := CheckMessage(m); f != nil {
			failed = append(failed, *f)
			continue
		}
		valid = append(valid, m)
	}
	return valid, failed, nil
}

// CheckReceipts sorts the receipt handles of one Delete: an empty one fails
// alone, as SQS would fail its entry.
func CheckReceipts(receipts []string) (valid []string, failed []sas.SendFailure) {
	valid = make([]string, 0, len(receipts))
	for _, r := range receipts {
		if r == "" {
			failed = append(failed, sas.SendFailure{ID: r, Code: CodeInvalidReceipt, Message: "empty receipt handle", SenderFault: true})
			continue
		}
		valid = append(valid, r)
	}
	return valid, failed
}

// Receive is a checked sas.ReceiveParams, in SQS's units.
type Receive struct {
	Max               int32 // 1..MaxBatchEntries
	WaitSeconds       int32
	VisibilitySeconds int32 // 0: the queue's default
}

// CheckReceive checks p against SQS's limits; a Max of 0 means 1.
func CheckReceive(p sas.ReceiveParams) (Receive, error) {
	n := p.Max
	if n == 0 {
		n = 1
	}
	if n < 1 || n > MaxBatchEntries {
		return Receive{}, &sas.ValidationError{Field: "Max", Reason: fmt.Sprintf("%d is outside 1..%d", p.Max, MaxBatchEntries)}
	}
	wait, err := CheckSeconds("Wait", p.Wait, MaxWait)
	if err != nil {
		return Receive{}, err
	}
	vis, err := CheckSeconds("Visibility", p.Visibility, MaxVisibility)
	if err != nil {
		return Receive{}, err
	}
	return Receive{Max: int32(n), WaitSeconds: wait, VisibilitySeconds: vis}, nil
}

// Chunks splits messages into batches of at most MaxBatchEntries entries and
// MaxBatchBytes body bytes, keeping their order. Every message is at most
// MaxBodyBytes (CheckMessage), so each fits an empty batch.
func Chunks(msgs []sas.OutboundMessage) [][]sas.OutboundMessage {
	var out [][]sas.OutboundMessage
	var cur []sas.OutboundMessage
	size := 0
	for _, m := range msgs {
		if len(cur) == MaxBatchEntries || (len(cur) > 0 && size+len(m.Body) > MaxBatchBytes) {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, m)
		size += len(m.Body)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// ReceiptChunks splits receipt handles into batches of MaxBatchEntries.
func ReceiptChunks(receipts []string) [][]string {
	var out [][]string
	for len(receipts) > MaxBatchEntries {
		out = append(out, receipts[:MaxBatchEntries])
		receipts = receipts[MaxBatchEntries:]
	}
	if len(receipts) > 0 {
		out = append(out, receipts)
	}
	return out
}
