package agenthost

import (
	"context"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sqslimits"
)

// ErrPermanent marks a Run failure that retrying the same request cannot fix:
// the service answered no for good, or the request asks for something this
// deployment cannot do. The Service reports it to the scheduler as an
// agent.reply with outcome "failed" (docs/pattern.md §2). Every other Run error means
// "no outcome": the Service sends nothing and leaves the request for
// redelivery, whose run repeats the call under the same key
// (docs/protocol.md, "Agent").
var ErrPermanent = errors.New("permanent failure")

// PermanentError is an ErrPermanent with the reason the reply carries, written
// for the operator who reads the order's status.
type PermanentError struct {
	Reason string
	Err    error // the underlying error, for logs and errors.As; may be nil
	// Rejected marks a business rejection (agent.Reject): the reply says
	// so (AgentReply.Rejected), and the order ends Rejected without an
	// alert.
	Rejected bool
}

func (e *PermanentError) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

// Unwrap lets errors.Is find both ErrPermanent and the cause.
func (e *PermanentError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrPermanent}
	}
	return []error{ErrPermanent, e.Err}
}

// RedeliveryError is a Run error that asks for the request to come back
// after Delay: no outcome, like any other error that is not ErrPermanent,
// but the request's visibility is set to Delay (at least RedeliveryBackoff,
// at most SQS's 12 hours) instead of the short RedeliveryBackoff. A runner returns it when the
// service said when to ask again ("retry after 10 minutes") and that is
// beyond the request's deadline. Found with errors.As, so it may be wrapped.
type RedeliveryError struct {
	Delay time.Duration
	Err   error // the cause, for logs; may be nil
}

func (e *RedeliveryError) Error() string {
	if e.Err == nil {
		return "retry after " + e.Delay.String()
	}
	return "retry after " + e.Delay.String() + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *RedeliveryError) Unwrap() error { return e.Err }

// maxReasonBytes bounds a reply's reason: it travels on to a status message
// and an operator alert, where a whole error page would only get in the way,
// and it counts in the size of every reply (sqslimits).
const maxReasonBytes = sqslimits.MaxReasonBytes

// reasonOf is the text a failed reply carries for err.
func reasonOf(err error) string {
	var pe *PermanentError
	r := err.Error()
	if errors.As(err, &pe) && pe.Reason != "" {
		r = pe.Reason
	}
	return truncate(r, maxReasonBytes)
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// ErrorTyper is an error that names its kind, for a retry policy's
// non-retryable errors and the scheduler's record (the SDK's agent.Named).
type ErrorTyper interface {
	ErrorType() string
}

// ErrorTypeOf names the kind of a run's error for a transient outcome: the
// name an ErrorTyper in its chain gives (the HTTP caller's open breaker
// and deadline name sas.ErrorCircuitOpen and sas.ErrorTimeout, as the SDK's
// breaker does), else sas.ErrorTimeout for a run cut by the step's deadline
// (callCtx's), else "" (a transient failure of no named kind). The runtime
// reads kinds, never a particular client's errors.
func ErrorTypeOf(err error, callCtx context.Context) string {
	var et ErrorTyper
	switch {
	case errors.As(err, &et) && et.ErrorType() != "":
		return et.ErrorType()
	case errors.Is(err, context.DeadlineExceeded),
		callCtx != nil && errors.Is(callCtx.Err(), context.DeadlineExceeded):
		return sas.ErrorTimeout
	}
	return ""
}

// rejectedOf reports whether err is a PermanentError marked Rejected.
func rejectedOf(err error) bool {
	var pe *PermanentError
	return errors.As(err, &pe) && pe.Rejected
}
