package agent

import (
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/internal/httpcall"
)

// Permanent marks err as a failure that trying again cannot fix: the
// service said no for good (a declined card, an unknown customer), or the
// request asks for something impossible. The step is reported failed, with
// err's text as the reason (cut to 1000 bytes), and the scheduler
// compensates the order: it runs the undo of every earlier step that has
// one.
//
// The mark survives wrapping (fmt.Errorf("...: %w", Permanent(err)) is
// still permanent) and wins over RetryAfter anywhere in the chain.
// Permanent(nil) is a permanent failure with the reason "permanent
// failure", never nil: a Func that returns it has failed.
func Permanent(err error) error {
	if err == nil {
		err = errors.New("permanent failure")
	}
	return &permanentError{err: err}
}

// permanentf is a permanent failure whose reason is written for the
// operator, with the error it explains still in the chain.
func permanentf(cause error, format string, args ...any) *permanentError {
	return &permanentError{msg: fmt.Sprintf(format, args...), err: cause}
}

// permanentError is what Permanent returns.
type permanentError struct {
	msg      string // the reason when set; else err's text
	err      error
	rejected bool // Reject: a business rejection
}

func (e *permanentError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return e.err.Error()
}

func (e *permanentError) Unwrap() error { return e.err }

// Reject marks err as a business rejection: the service refused the step
// as an expected outcome of the business (a declined card, an expense over
// budget, an item out of stock), not as an incident. Like Permanent, the
// step fails at once and the scheduler compensates the order (every earlier
// step with an undo is undone, and this step's undo too, since a refusal
// is not proof of no effect), but the order then ends in its own final
// state, Rejected: the submitter's last status is "rejected", naming the
// step and err's text as the reason, and no operator is alerted. An
// operational failure (Permanent, a step given up on) still alerts.
//
// In an undo, Reject is a permanent failure of the undo (an undo cannot be
// refused as a business outcome): the operator is alerted.
//
// The mark survives wrapping. Reject(nil) is a rejection with the reason
// "rejected", never nil.
func Reject(err error) error {
	if err == nil {
		err = errors.New("rejected")
	}
	return &permanentError{err: err, rejected: true}
}

// rejected reports whether err carries Reject's mark.
func rejected(err error) bool {
	var pe *permanentError
	return errors.As(err, &pe) && pe.rejected
}

// RetryAfter marks err as transient with a time to wait: the service said
// "not now, ask again in d" (an HTTP 429 or 503 with Retry-After, a
// rate-limit window). If the step's deadline leaves room, the SDK waits d
// and runs the Func again, within its tries (see Tries); otherwise the
// attempt has failed, and the scheduler's next attempt waits at least d
// (within SQS's 15-minute delay). From an older scheduler, the request is
// left for redelivery after d instead. A negative d counts as 0.
//
// The mark survives wrapping. RetryAfter(d, nil) is an error, never nil.
func RetryAfter(d time.Duration, err error) error {
	d = max(d, 0)
	if err == nil {
		err = fmt.Errorf("retry after %s", d)
	}
	return &retryAfterError{d: d, err: err}
}

// retryAfterError is what RetryAfter returns.
type retryAfterError struct {
	d   time.Duration
	err error
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// class is what a Func's error means for the request.
type class int

const (
	// transient: try again in-process after a jittered backoff, while the
	// tries and the deadline allow.
	transient class = iota
	// permanent: report failed.
	permanent
	// later: the service said when; wait that long, in-process or by
	// redelivery.
	later
	// spent: an error whose retries were already made (the HTTP client
	// gave up after its own tries, or stopped at the deadline): trying
	// again at once would repeat them. Left for redelivery.
	spent
)

// classify reads err's class, and for later the wait asked.
func classify(err error) (class, time.Duration) {
	var pe *permanentError
	var ra *retryAfterError
	switch {
	case errors.As(err, &pe):
		return permanent, 0
	case errors.As(err, &ra):
		return later, ra.d
	case errors.Is(err, httpcall.ErrTransient), errors.Is(err, httpcall.ErrDeadline):
		return spent, 0
	}
	return transient, 0
}

// Named gives err a name, so that a step's retry policy can list it among
// its non-retryable errors (a workflow step's retry.nonRetryableErrors; in
// Go, workflow.Retry.NonRetryableErrors): an error so named ends the step at
// once as a permanent failure, where any other transient error is tried
// again. The name is also what the scheduler records for the failed
// attempt. Names are compared exactly; "Timeout" and "CircuitOpen" are the
// agent's own (the step's timeout passed; its breaker refused the call).
//
// Named(name, Permanent(err)) is still permanent, Named(name, RetryAfter(d,
// err)) still asks for d. Named(name, nil) is an error, never nil.
func Named(name string, err error) error {
	if err == nil {
		err = errors.New(name)
	}
	return &namedError{name: name, err: err}
}

type namedError struct {
	name string
	err  error
}

func (e *namedError) Error() string     { return e.err.Error() }
func (e *namedError) Unwrap() error     { return e.err }
func (e *namedError) ErrorType() string { return e.name }

// IsPermanent reports whether err is marked Permanent anywhere in its
// chain, which is how the SDK reads it: the step is reported failed. For a
// step author's tests of their own error handling.
func IsPermanent(err error) bool {
	c, _ := classify(err)
	return c == permanent
}

// RetryDelay reports whether err asks to be tried again after a wait
// (RetryAfter anywhere in its chain, and not Permanent, which wins), and
// the wait.
func RetryDelay(err error) (time.Duration, bool) {
	c, d := classify(err)
	return d, c == later
}

// ErrorName is the name a retry policy matches err by: the one Named gave
// it, or the agent's own ("CircuitOpen" for a run its breaker refused;
// "Timeout" for an HTTP call stopped by the deadline); "" for none.
func ErrorName(err error) string {
	var n interface{ ErrorType() string }
	if errors.As(err, &n) {
		return n.ErrorType()
	}
	return ""
}
