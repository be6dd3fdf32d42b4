package httpcall

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sas-go/sas/internal/sas"
)

// The outcome classes of a Call. A failed Call's error matches exactly one of
// ErrPermanent, ErrTransient and ErrDeadline (or sas.ErrInvalid for a request
// that could never be sent). ErrCircuitOpen is a cause, not a class: it sits
// under ErrTransient when an open breaker refused a try, which ends the Call
// at once.
var (
	// ErrPermanent: the service answered and retrying the same request will not
	// change its answer (400, 401, 402, 403, 404, 409 without Retry-After,
	// 422, ...). The agent reports it back as an error reply (docs/pattern.md
	// §2). A *StatusError in the chain carries the status and a body excerpt
	// for the reason.
	ErrPermanent = errors.New("permanent failure")
	// ErrTransient: every try allowed by MaxTries failed in a way a later try
	// might not, or the caller's own context ended. The last cause is wrapped.
	ErrTransient = errors.New("transient failure")
	// ErrDeadline: the step's deadline (less the safety margin) arrived, or the
	// next wait would cross it. The agent sends nothing back and leaves the
	// request for redelivery (docs/protocol.md, "Agent").
	ErrDeadline error = &kindError{"step deadline reached", sas.ErrorTimeout}
	// ErrCircuitOpen: the endpoint's breaker rejected the try without sending
	// it, and the Call ended there (a failed try, not a wait).
	ErrCircuitOpen error = &kindError{"circuit open", sas.ErrorCircuitOpen}
	// ErrKeyInUse is a cause, under ErrTransient or ErrDeadline: the service
	// answered 409 with Retry-After, the Idempotency-Key draft's "a request
	// with this key is still in progress". A 409 without Retry-After is a
	// genuine conflict and files under ErrPermanent instead.
	ErrKeyInUse = errors.New("idempotency key in use by a request in progress")
)

// kindError is a sentinel that names its kind (ErrorType) the way every
// runner's error may: the agent runtime (internal/agenthost) reads the kind,
// not this package's errors, to decide how long a request without an outcome
// rests and what the scheduler's record calls the failure.
type kindError struct{ msg, kind string }

func (e *kindError) Error() string     { return e.msg }
func (e *kindError) ErrorType() string { return e.kind }

// excerptBytes bounds the body excerpt kept in a StatusError: enough for a
// service's error code and message, short enough for a status reason field.
const excerptBytes = 200

// StatusError is an HTTP answer that was not a success. It is wrapped under
// ErrPermanent or ErrTransient depending on the status.
type StatusError struct {
	Status  int
	Excerpt string // start of the body, one line, valid UTF-8; "" when empty
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("HTTP %d", e.Status)
	if t := http.StatusText(e.Status); t != "" {
		s += " " + t
	}
	if e.Excerpt != "" {
		s += ": " + e.Excerpt
	}
	return s
}

// excerpt makes a body fit a one-line reason: valid UTF-8, control characters
// and runs of white space folded to one space, cut at a rune boundary.
func excerpt(body []byte) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToValidUTF8(string(body), "\uFFFD") {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			if b.Len()+1 > excerptBytes {
				return b.String() + "…"
			}
			b.WriteByte(' ')
			space = false
		}
		if b.Len()+utf8.RuneLen(r) > excerptBytes {
			return b.String() + "…"
		}
		b.WriteRune(r)
	}
	return b.String()
}
