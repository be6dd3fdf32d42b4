package sqsqueue

import (
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/sas-go/sas/internal/sas"
)

// SQS limits the adapter checks before it calls, so that a message that can
// never be sent is reported alone instead of failing the request it shares
// with others (SQS fails a whole batch that is too long).
const (
	// MaxBatchEntries is the most entries one SendMessageBatch or
	// DeleteMessageBatch request may carry.
	MaxBatchEntries = 10
	// MaxBodyBytes is the largest body we send, and MaxBatchBytes the most body
	// bytes in one batch. SQS raised both to 1 MiB in 2025, but queues created
	// earlier, LocalStack and ElasticMQ keep 256 KiB: we hold to what every
	// backend accepts.
	MaxBodyBytes  = 256 * 1024
	MaxBatchBytes = 256 * 1024
	// MaxDelay, MaxWait and MaxVisibility bound DelaySeconds, WaitTimeSeconds
	// and VisibilityTimeout.
	MaxDelay      = 15 * time.Minute
	MaxWait       = 20 * time.Second
	MaxVisibility = 12 * time.Hour
)

// Codes of the failures the adapter reports itself, named as SQS names them.
const (
	codeInvalidParameter = "InvalidParameterValue"
	codeInvalidContents  = "InvalidMessageContents"
	codeInvalidReceipt   = "ReceiptHandleIsInvalid"
)

// seconds turns a duration into the whole seconds SQS takes, rounding up: a
// caller who asks for 1.5 s of visibility wants at least that.
func seconds(d time.Duration) int64 {
	return int64(math.Ceil(d.Seconds()))
}

// checkSeconds validates a duration parameter against [0, limit].
func checkSeconds(field string, d, limit time.Duration) (int32, error) {
	if d < 0 || seconds(d) > seconds(limit) {
		return 0, &sas.ValidationError{Field: field, Reason: fmt.Sprintf("%s is outside 0..%s", d, limit)}
	}
	return int32(seconds(d)), nil
}

// checkMessage returns the failure SQS would report for a message that can
// never be sent, or nil.
func checkMessage(m sas.OutboundMessage) *sas.SendFailure {
	fail := func(code, format string, args ...any) *sas.SendFailure {
		return &sas.SendFailure{ID: m.ID, Code: code, Message: fmt.Sprintf(format, args...), SenderFault: true}
	}
	switch {
	case m.Body == "":
		return fail(codeInvalidParameter, "message body is empty")
	case len(m.Body) > MaxBodyBytes:
		return fail(codeInvalidParameter, "message body is %d bytes, more than %d", len(m.Body), MaxBodyBytes)
	case m.Delay < 0 || seconds(m.Delay) > seconds(MaxDelay):
		return fail(codeInvalidParameter, "delay %s is outside 0..%s", m.Delay, MaxDelay)
	}
	if r, at, ok := firstInvalidRune(m.Body); !ok {
		return fail(codeInvalidContents, "message body has character %U at byte %d, which SQS does not accept", r, at)
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

// checkIDs requires every message to have a non-empty ID unique within the
// Send: a failure is reported by ID, so an ambiguous one could not be told apart.
func checkIDs(msgs []sas.OutboundMessage) error {
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

// chunks splits messages into batches of at most MaxBatchEntries entries and
// MaxBatchBytes body bytes, keeping their order. Every message is at most
// MaxBodyBytes, so each fits an empty batch.
func chunks(msgs []sas.OutboundMessage) [][]sas.OutboundMessage {
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

// receiptChunks splits receipt handles into batches of MaxBatchEntries.
func receiptChunks(receipts []string) [][]string {
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
