package sas

import (
	"fmt"
	"unicode/utf8"
)

// MaxReasonBytes bounds a reason carried into a step's record, its
// history, an alert or a status: what an agent, a submitter or an operator
// wrote is cut there, with a marker (docs/trust.md).
const MaxReasonBytes = 1 << 10

// BoundReason cuts s to at most MaxReasonBytes bytes on a rune boundary,
// marking the cut with the original length.
func BoundReason(s string) string {
	s = Redact(s)
	if len(s) <= MaxReasonBytes {
		return s
	}
	marker := fmt.Sprintf("… [cut: %d bytes]", len(s))
	cut := MaxReasonBytes - len(marker)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + marker
}
