package memqueue

import (
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/sas-go/sas/internal/sas"
)

// The SQS limits, checked as the SQS adapter checks them, and the same
// batching, so that a test's request counts and failures are what SQS would
// give. (Adapters do not import each other; the contract suite in
// internal/queuetest keeps the two in step.)
const (
	MaxBatchEntries = 10
	MaxBodyBytes    = 256 * 1024
	MaxBatchBytes   = 256 * 1024
	MaxDelay        = 15 * time.Minute
	MaxWait         = 20 * time.Second
	MaxVisibility   = 12 * time.Hour

	// DefaultVisibility is SQS's default queue visibility timeout.
	DefaultVisibility = 30 * time.Second
)

const (
	codeInvalidParameter = "InvalidParameterValue"
	codeInvalidContents  = "InvalidMessageContents"
	codeInvalidReceipt   = "ReceiptHandleIsInvalid"
)

// ceilSeconds rounds a duration up to whole seconds, the unit SQS takes.
func ceilSeconds(d time.Duration) time.Duration {
	return time.Duration(math.Ceil(d.Seconds())) * time.Second
}

func checkDuration(field string, d, limit time.Duration) (time.Duration, error) {
	if d < 0 || ceilSeconds(d) > limit {
		return 0, &sas.ValidationError{Field: field, Reason: fmt.Sprintf("%s is outside 0..%s", d, limit)}
	}
	return ceilSeconds(d), nil
}

func checkMessage(m sas.OutboundMessage) *sas.SendFailure {
	fail := func(code, format string, args ...any) *sas.SendFailure {
		return &sas.SendFailure{ID: m.ID, Code: code, Message: fmt.Sprintf(format, args...), SenderFault: true}
	}
	switch {
	case m.Body == "":
		return fail(codeInvalidParameter, "message body is empty")
	case len(m.Body) > MaxBodyBytes:
		return fail(codeInvalidParameter, "message body is %d bytes, more than %d", len(m.Body), MaxBodyBytes)
	case m.Delay < 0 || ceilSeconds(m.Delay) > MaxDelay:
		return fail(codeInvalidParameter, "delay %s is outside 0..%s", m.Delay, MaxDelay)
	}
	for i, r := range m.Body {
		if !validRune(r, m.Body[i:]) {
			return fail(codeInvalidContents, "message body has character %U at byte %d, which SQS does not accept", r, i)
		}
	}
	return nil
}

// validRune: #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF,
// and well-formed UTF-8.
func validRune(r rune, rest string) bool {
	switch {
	case r == utf8.RuneError:
		_, size := utf8.DecodeRuneInString(rest)
		return size > 1
	case r == 0x9 || r == 0xA || r == 0xD:
		return true
	case r >= 0x20 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000 && r <= 0x10FFFF:
		return true
	}
	return false
}

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

// sendRequests is how many SQS requests sending msgs takes: one SendMessage,
// or batches of at most 10 entries and 256 KiB of bodies.
func sendRequests(msgs []sas.OutboundMessage) int {
	if len(msgs) <= 1 {
		return len(msgs)
	}
	n, entries, size := 0, 0, 0
	for _, m := range msgs {
		if entries == 0 || entries == MaxBatchEntries || size+len(m.Body) > MaxBatchBytes {
			n++
			entries, size = 0, 0
		}
		entries++
		size += len(m.Body)
	}
	return n
}

// deleteRequests is how many SQS requests deleting n receipts takes.
func deleteRequests(n int) int {
	if n <= 1 {
		return n
	}
	return (n + MaxBatchEntries - 1) / MaxBatchEntries
}
