// Package httpcall calls one remote HTTP service for one step, the way an
// Agent must (docs/pattern.md §2): it retries transient failures with full-jitter
// exponential backoff, sends the same Idempotency-Key on every try so the
// service can de-duplicate, stops at the step's deadline less a safety margin,
// and keeps a circuit breaker per endpoint.
//
// Outcome classes (see ErrPermanent, ErrTransient, ErrDeadline):
//
//	success       the service answered 2xx: reply with the result
//	ErrPermanent  the service answered no for good: reply with an error
//	ErrDeadline   out of time: reply with nothing
//	ErrTransient  out of tries, refused by the endpoint's open breaker
//	              (ErrCircuitOpen, at once: no call, no wait), or the
//	              caller's context ended early: reply with nothing
//
// The agent reports a request that ended in ErrDeadline or ErrTransient as a
// failed attempt (a transient outcome) to a scheduler that takes one
// (docs/protocol.md, "A failure is not a wait"), else leaves it for
// redelivery; either way the next run repeats the call under the same key.
//
// Time is read from the injected sas.Clock only; waits go through the
// injected Sleep. The only real timer is the one that bounds a try in flight,
// since no fake can interrupt a blocked network read.
package httpcall

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// IdempotencyHeader is the header that carries Request.IdempotencyKey.
const IdempotencyHeader = "Idempotency-Key"

// errorBodyBytes bounds how much of a non-2xx body is read: the excerpt needs
// little, and a 5xx page can be large.
const errorBodyBytes = 4 << 10

// drainBytes bounds how much unread body is discarded so the connection can
// be reused; past that, closing it is cheaper than reading on.
const drainBytes = 64 << 10

// Caller makes calls to remote HTTP services. It is safe for concurrent use;
// its breakers are shared by all calls through it.
type Caller struct {
	cfg      Config
	breakers breakers
}

// New fills in cfg's defaults, checks it and returns a Caller.
func New(cfg Config) (*Caller, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("configuring the HTTP caller: %w", err)
	}
	return &Caller{cfg: cfg, breakers: breakers{cfg: cfg.Breaker}}, nil
}

// Call sends r until it succeeds, fails permanently, runs out of tries, or
// runs out of time. See the package comment for what each outcome means.
func (c *Caller) Call(ctx context.Context, r Request) (Result, error) {
	target, err := r.target()
	if err != nil {
		return Result{}, fmt.Errorf("calling %s %s%s: %w", r.Method, sas.Redact(r.Endpoint), r.Path, err)
	}
	// No error names a URL's credentials (sas.Redact).
	op := r.Method + " " + sas.Redact(target)
	if err := r.validate(); err != nil {
		return Result{}, fmt.Errorf("calling %s: %w", op, err)
	}

	stop := r.Deadline.Add(-c.cfg.SafetyMargin)
	key := breakerKey(r.Endpoint)
	if r.Undo {
		key += undoBreaker
	}
	br := c.breakers.get(key)
	var res Result
	var last error // why the previous try failed
	for n := 0; ; n++ {
		now := c.cfg.Clock.Now()
		if !now.Before(stop) {
			if n == 0 {
				return res, fmt.Errorf("calling %s: %w: deadline %s less margin %s has passed (now %s); nothing sent",
					op, ErrDeadline, r.Deadline.Format(time.RFC3339Nano), c.cfg.SafetyMargin, now.Format(time.RFC3339Nano))
			}
			return res, fmt.Errorf("calling %s: %w after %d tries: %w", op, ErrDeadline, n, last)
		}

		t, _, admitted := br.allow(now)
		if !admitted {
			// A refused try is a failed try that makes no call, and the
			// next ones would be refused too while the breaker rests (or
			// its probe is out): the Call ends now, without waiting for
			// the breaker to half-open, so the agent reports the attempt
			// failed and the step's retry policy, not this Call, decides
			// when it runs again (docs/protocol.md, "A failure is not a
			// wait"). The same rule as the SDK's own breaker.
			return res, circuitOpen(op, sas.Redact(r.Endpoint), n, last)
		}
		res.Tries++
		out := c.try(ctx, stop, r, target)
		br.report(t, out.health, c.cfg.Clock.Now())
		if out.status != 0 {
			res.Status, res.Body, res.Truncated = out.status, out.body, out.truncated
		}
		if out.class == nil {
			return res, nil
		}
		if out.class != ErrTransient || ctx.Err() != nil {
			return res, fmt.Errorf("calling %s: %w: %w", op, out.class, out.cause)
		}
		last = out.cause
		if br.current(c.cfg.Clock.Now()) == BreakerOpen {
			// This try (or a concurrent Call's) opened the breaker: the
			// next try would be refused, so no backoff is slept for it.
			return res, circuitOpen(op, sas.Redact(r.Endpoint), n+1, last)
		}
		floor := out.retryAfter // the least the next wait may be

		if n+1 >= c.cfg.MaxTries {
			return res, fmt.Errorf("calling %s: %w after %d tries: %w", op, ErrTransient, n+1, last)
		}
		wait := max(fullJitter(backoffCeiling(c.cfg.BaseBackoff, c.cfg.MaxBackoff, n), c.cfg.Rand()), floor)
		now = c.cfg.Clock.Now()
		// A wait that ends at or after the stop leaves no time for the try it
		// was waiting for: stop now rather than sleep for nothing.
		if !now.Add(wait).Before(stop) {
			return res, fmt.Errorf("calling %s: %w: next try would wait %s, past %s: last failure: %w",
				op, ErrDeadline, wait, stop.Format(time.RFC3339Nano), last)
		}
		if err := c.cfg.Sleep(ctx, wait); err != nil {
			return res, fmt.Errorf("calling %s: %w: waiting to retry: %w (last failure: %w)", op, c.endedClass(stop), err, last)
		}
	}
}

// circuitOpen is the error of a Call that ends on its endpoint's open
// breaker after tries tries, the last of which failed with last.
func circuitOpen(op, endpoint string, tries int, last error) error {
	if tries == 0 {
		return fmt.Errorf("calling %s: %w: endpoint %s: %w; nothing sent", op, ErrTransient, endpoint, ErrCircuitOpen)
	}
	return fmt.Errorf("calling %s: %w after %d tries: endpoint %s: %w (last failure: %w)",
		op, ErrTransient, tries, endpoint, ErrCircuitOpen, last)
}

// outcome is the result of one try. class is nil on success, else one of the
// class sentinels; cause is the detail, without the sentinel, so that Call
// can file it under another class (a transient cause of an ErrDeadline).
type outcome struct {
	status     int
	body       []byte
	truncated  bool
	class      error
	cause      error
	health     health
	retryAfter time.Duration
}

// The causes that tell which timer ended a try.
var (
	errAttemptTimeout = errors.New("try timed out")
	errStepDeadline   = errors.New("step deadline less margin reached")
)

// try sends one request and classifies what came back.
func (c *Caller) try(ctx context.Context, stop time.Time, r Request, target string) outcome {
	remaining := stop.Sub(c.cfg.Clock.Now())
	timeout, cause := remaining, errStepDeadline
	if c.cfg.AttemptTimeout > 0 && c.cfg.AttemptTimeout < remaining {
		timeout, cause = c.cfg.AttemptTimeout, errAttemptTimeout
	}
	// The timer is real even with a fake Clock: it has to interrupt a network
	// read. remaining is measured on the Clock, so the two agree in production.
	tctx, cancel := context.WithTimeoutCause(ctx, timeout, cause)
	defer cancel()

	var body io.Reader
	if r.Body != nil {
		body = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(tctx, r.Method, target, body)
	if err != nil {
		// validate checked everything NewRequest does; kept for safety.
		return outcome{class: ErrPermanent, cause: fmt.Errorf("building request: %w", err), health: neutral}
	}
	for k, vs := range r.Header {
		req.Header[k] = append([]string(nil), vs...)
	}
	req.Header.Set(IdempotencyHeader, r.IdempotencyKey)

	resp, err := c.cfg.Client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = sas.Redact(ue.URL) // net/http masks the password only
		}
		return c.interrupted(ctx, tctx, stop, err)
	}
	defer func() {
		_, _ = io.CopyN(io.Discard, resp.Body, drainBytes)
		_ = resp.Body.Close()
	}()

	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		b, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxResponseBytes+1))
		if err != nil {
			return c.interrupted(ctx, tctx, stop, fmt.Errorf("reading HTTP %d body: %w", resp.StatusCode, err))
		}
		if int64(len(b)) > c.cfg.MaxResponseBytes {
			return outcome{status: resp.StatusCode, body: b[:c.cfg.MaxResponseBytes], truncated: true, health: healthy}
		}
		return outcome{status: resp.StatusCode, body: b, health: healthy}
	}

	// A body cut short is still a fine excerpt: the status is the answer.
	b, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyBytes))
	se := &StatusError{Status: resp.StatusCode, Excerpt: excerpt(b)}
	out := outcome{status: resp.StatusCode, body: b, cause: se}
	if transientStatus(resp.StatusCode) {
		out.class, out.health = ErrTransient, unhealthy
		out.retryAfter, _ = retryAfter(resp.Header, c.cfg.Clock.Now())
		return out
	}
	// 409 with Retry-After is the Idempotency-Key draft's "a request with this
	// key is still in progress" (a duplicate delivery overlapping the first):
	// wait and ask again for the stored answer. The server is healthy, so the
	// breaker does not count it. A bare 409 is a real conflict: permanent.
	if resp.StatusCode == http.StatusConflict && resp.Header.Get("Retry-After") != "" {
		out.class, out.health = ErrTransient, healthy
		out.cause = fmt.Errorf("%w: %w", ErrKeyInUse, se)
		out.retryAfter, _ = retryAfter(resp.Header, c.cfg.Clock.Now())
		return out
	}
	out.class, out.health = ErrPermanent, healthy
	return out
}

// interrupted classifies a try that got no complete answer: the caller's
// context ended, the step's deadline arrived, the try timed out, or the
// network failed. Only the first two end the Call.
func (c *Caller) interrupted(ctx, tctx context.Context, stop time.Time, err error) outcome {
	switch {
	case ctx.Err() != nil:
		// The caller gave up (a Lambda about to time out): nothing is known
		// about the service, so the breaker is not told.
		return outcome{class: c.endedClass(stop), health: neutral,
			cause: fmt.Errorf("caller's context ended: %w", context.Cause(ctx))}
	case tctx.Err() != nil && context.Cause(tctx) == errStepDeadline:
		// Counted against the service: one that hangs must open the breaker.
		return outcome{class: ErrDeadline, health: unhealthy,
			cause: fmt.Errorf("try in flight: %w", err)}
	case tctx.Err() != nil:
		return outcome{class: ErrTransient, health: unhealthy,
			cause: fmt.Errorf("%w: %w", errAttemptTimeout, err)}
	}
	// Everything else from the transport is a network failure worth another
	// try; validate has ruled out the malformed requests that would not be.
	return outcome{class: ErrTransient, health: unhealthy, cause: err}
}

// endedClass files the end of the caller's context: ErrDeadline if the
// step's time is up anyway (whichever timer noticed first), else ErrTransient,
// since the step itself could still succeed on another delivery.
func (c *Caller) endedClass(stop time.Time) error {
	if !c.cfg.Clock.Now().Before(stop) {
		return ErrDeadline
	}
	return ErrTransient
}

// transientStatus reports whether a later try may get another answer:
// 408 Request Timeout, 429 Too Many Requests, and 5xx except 501 Not
// Implemented and 505 HTTP Version Not Supported, which describe the server's
// software, not its health.
func transientStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests:
		return true
	case http.StatusNotImplemented, http.StatusHTTPVersionNotSupported:
		return false
	}
	return code >= 500 && code < 600
}

// breakerKey makes "http://svc/" and "http://svc" share a breaker.
func breakerKey(endpoint string) string { return strings.TrimRight(endpoint, "/") }

// undoBreaker marks the key of an endpoint's undo breaker (Request.Undo).
const undoBreaker = " (undos)"

// BreakerState reports the state of endpoint's breaker as a try now would
// find it (open past its period reads half-open). Endpoints never called read
// closed.
func (c *Caller) BreakerState(endpoint string) BreakerState {
	return c.breakers.get(breakerKey(endpoint)).current(c.cfg.Clock.Now())
}

// Sleep waits d, returning early with ctx's cause if ctx ends first; for d
// of 0 or less it only reports whether ctx has ended. It is the default
// Config.Sleep, and the agent's default wait.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
