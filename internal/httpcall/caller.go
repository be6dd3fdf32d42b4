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
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// IdempotencyHeader is the header that carries Request.IdempotencyKey.
const IdempotencyHeader = "Idempotency-Key"

// Defaults for zero Config fields.
const (
	DefaultMaxAttempts      = 5
	DefaultBaseBackoff      = 100 * time.Millisecond
	DefaultMaxBackoff       = 5 * time.Second
	DefaultSafetyMargin     = time.Second
	DefaultMaxResponseBytes = 1 << 20
	DefaultFailureThreshold = 5
	DefaultFailureRate      = 0.8
	DefaultBreakerWindow    = 10 * time.Second
	DefaultOpenFor          = 10 * time.Second
)

// errorBodyBytes bounds how much of a non-2xx body is read: the excerpt needs
// little, and a 5xx page can be large.
const errorBodyBytes = 4 << 10

// drainBytes bounds how much unread body is discarded so the connection can
// be reused; past that, closing it is cheaper than reading on.
const drainBytes = 64 << 10

// Config configures a Caller. Zero fields take the defaults above; New
// rejects negative or inconsistent values.
type Config struct {
	// MaxAttempts bounds the tries of one Call. A try an open breaker
	// rejects ends the Call at once (ErrTransient, ErrCircuitOpen).
	MaxAttempts int
	// BaseBackoff and MaxBackoff shape the wait before retry n (n from 0):
	// uniform in [0, min(MaxBackoff, BaseBackoff·2^n)).
	BaseBackoff time.Duration
	MaxBackoff  time.Duration
	// AttemptTimeout bounds one try, so a hung connection costs one try rather
	// than the whole step; its expiry is a transient failure. 0: a try may use
	// all the time left.
	AttemptTimeout time.Duration
	// SafetyMargin is kept back from the step's deadline (Request.Deadline):
	// the agent still has to send its reply before that deadline.
	SafetyMargin time.Duration
	// MaxResponseBytes bounds how much of a 2xx body is kept. A larger one is
	// still a success (the service did the work; failing it would have the
	// step undone): Result.Body holds the first MaxResponseBytes and
	// Result.Truncated says so.
	MaxResponseBytes int64
	Breaker          BreakerConfig
	// Client sends the requests. Default: a client of its own transport
	// (so nobody else's CloseIdleConnections cuts its tries), with no overall
	// timeout (the deadline bounds each try), that does not follow redirects
	// because a redirected POST turns into a GET without its body. A 3xx is
	// then ErrPermanent: the endpoint is misconfigured.
	Client *http.Client
	// Clock is the only source of "now". Default sas.SystemClock.
	Clock sas.Clock
	// Sleep waits d or until ctx ends. Default: a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a number in [0, 1) and must be safe for concurrent use.
	// Default math/rand/v2.Float64.
	Rand func() float64
}

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

// withDefaults fills in the zero fields.
func (c Config) withDefaults() Config {
	c.MaxAttempts = cmp.Or(c.MaxAttempts, DefaultMaxAttempts)
	c.BaseBackoff = cmp.Or(c.BaseBackoff, DefaultBaseBackoff)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, max(DefaultMaxBackoff, c.BaseBackoff))
	c.SafetyMargin = cmp.Or(c.SafetyMargin, DefaultSafetyMargin)
	c.MaxResponseBytes = cmp.Or(c.MaxResponseBytes, DefaultMaxResponseBytes)
	c.Breaker.FailureThreshold = cmp.Or(c.Breaker.FailureThreshold, DefaultFailureThreshold)
	c.Breaker.OpenFor = cmp.Or(c.Breaker.OpenFor, DefaultOpenFor)
	c.Breaker.FailureRate = cmp.Or(c.Breaker.FailureRate, DefaultFailureRate)
	c.Breaker.Window = cmp.Or(c.Breaker.Window, DefaultBreakerWindow)
	if c.Client == nil {
		var rt http.RoundTripper = http.DefaultTransport
		if t, ok := rt.(*http.Transport); ok {
			rt = t.Clone()
		}
		c.Client = &http.Client{
			Transport:     rt,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if c.Clock == nil {
		c.Clock = sas.SystemClock{}
	}
	if c.Sleep == nil {
		c.Sleep = Sleep
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	return c
}

// validate names the first problem of a configuration with its defaults in
// (a zero field took its default; a negative one is a mistake).
func (c Config) validate() error {
	invalid := func(field, reason string) error { return &sas.ValidationError{Field: field, Reason: reason} }
	for _, f := range []struct {
		name     string
		negative bool
	}{
		{"MaxAttempts", c.MaxAttempts < 0},
		{"BaseBackoff", c.BaseBackoff < 0},
		{"MaxBackoff", c.MaxBackoff < 0},
		{"AttemptTimeout", c.AttemptTimeout < 0},
		{"SafetyMargin", c.SafetyMargin < 0},
		{"MaxResponseBytes", c.MaxResponseBytes < 0},
		{"Breaker.FailureThreshold", c.Breaker.FailureThreshold < 0},
		{"Breaker.OpenFor", c.Breaker.OpenFor < 0},
		{"Breaker.FailureRate", c.Breaker.FailureRate < 0},
		{"Breaker.Window", c.Breaker.Window < 0},
	} {
		if f.negative {
			return invalid(f.name, "must not be negative")
		}
	}
	if c.MaxBackoff < c.BaseBackoff {
		return invalid("MaxBackoff", fmt.Sprintf("%s is below BaseBackoff %s", c.MaxBackoff, c.BaseBackoff))
	}
	return nil
}

// Request is one call for one step.
type Request struct {
	// Endpoint is the service's base URL (http or https); it also keys the
	// circuit breaker. Path is appended to it and may carry a query.
	Endpoint string
	Method   string
	Path     string
	// Body is sent on every try; nil sends none.
	Body []byte
	// IdempotencyKey is stable per order step (and attempt of the workflow,
	// if the caller wants a re-driven step to count as new work). It is sent
	// as the Idempotency-Key header on every try. Required.
	IdempotencyKey string
	// Deadline is when the step's time is up for this agent: the agent's own
	// deadline for the request (agent.Deadline: the step's TimeoutMs from
	// when it started the request, or the step's CompleteBy for a request
	// without one), or the invocation's end if sooner. Required.
	Deadline time.Time
	// Header holds extra headers (Content-Type, auth). An Idempotency-Key in
	// it must equal IdempotencyKey.
	Header http.Header
}

// Result is what a Call got. On error it still tells how many tries were
// made, and the status and (possibly truncated) body of the last answer, if
// any.
type Result struct {
	Status int
	Body   []byte
	// Truncated: a 2xx body longer than Config.MaxResponseBytes, of which
	// Body holds the start.
	Truncated bool
	// Attempts counts the tries handed to the HTTP client. A try cut short by
	// the deadline may not have reached the service; one that reached it may
	// have been sent twice by the transport itself (Go replays a request with
	// an Idempotency-Key on a keep-alive connection that was found dead),
	// which the key makes harmless. Tries rejected by the breaker do not count.
	Attempts int
}

// Call sends r until it succeeds, fails permanently, runs out of tries, or
// runs out of time. See the package comment for what each outcome means.
func (c *Caller) Call(ctx context.Context, r Request) (Result, error) {
	target, err := r.target()
	if err != nil {
		return Result{}, fmt.Errorf("calling %s %s%s: %w", r.Method, r.Endpoint, r.Path, err)
	}
	op := r.Method + " " + target
	if err := r.validate(); err != nil {
		return Result{}, fmt.Errorf("calling %s: %w", op, err)
	}

	stop := r.Deadline.Add(-c.cfg.SafetyMargin)
	br := c.breakers.get(breakerKey(r.Endpoint))
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
			return res, circuitOpen(op, r.Endpoint, n, last)
		}
		res.Attempts++
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
			return res, circuitOpen(op, r.Endpoint, n+1, last)
		}
		floor := out.retryAfter // the least the next wait may be

		if n+1 >= c.cfg.MaxAttempts {
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

// target joins Endpoint and Path with exactly one slash, keeping any path in
// the endpoint (http://host/api + /orders → http://host/api/orders).
func (r Request) target() (string, error) {
	base, err := url.Parse(r.Endpoint)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return "", &sas.ValidationError{Field: "Endpoint", Reason: fmt.Sprintf("%q is not an absolute http(s) URL", r.Endpoint)}
	}
	if base.RawQuery != "" || base.Fragment != "" {
		return "", &sas.ValidationError{Field: "Endpoint", Reason: "must not carry a query or fragment; put them in Path"}
	}
	t := strings.TrimRight(r.Endpoint, "/")
	if r.Path != "" {
		t += "/" + strings.TrimLeft(r.Path, "/")
	}
	if _, err := url.Parse(t); err != nil {
		return "", &sas.ValidationError{Field: "Path", Reason: err.Error()}
	}
	return t, nil
}

// validate rejects what no try could fix, so that every error from the
// transport can be taken for a network failure.
func (r Request) validate() error {
	switch {
	case r.Method == "" || !isToken(r.Method):
		return &sas.ValidationError{Field: "Method", Reason: fmt.Sprintf("%q is not an HTTP method", r.Method)}
	case r.IdempotencyKey == "":
		return &sas.ValidationError{Field: "IdempotencyKey", Reason: "required: the service de-duplicates retries by it"}
	case !isHeaderValue(r.IdempotencyKey):
		return &sas.ValidationError{Field: "IdempotencyKey", Reason: "contains control characters"}
	case r.Deadline.IsZero():
		return &sas.ValidationError{Field: "Deadline", Reason: "required"}
	}
	for k, vs := range r.Header {
		if !isToken(k) {
			return &sas.ValidationError{Field: "Header", Reason: fmt.Sprintf("%q is not a header name", k)}
		}
		for _, v := range vs {
			if !isHeaderValue(v) {
				return &sas.ValidationError{Field: "Header", Reason: fmt.Sprintf("%s value contains control characters", k)}
			}
		}
		if http.CanonicalHeaderKey(k) == IdempotencyHeader && (len(vs) != 1 || vs[0] != r.IdempotencyKey) {
			return &sas.ValidationError{Field: "Header", Reason: "Idempotency-Key differs from IdempotencyKey"}
		}
	}
	return nil
}

// isToken reports whether s is an RFC 9110 token (method and header names).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// isHeaderValue reports whether s can be sent as a header value: no control
// characters other than tab.
func isHeaderValue(s string) bool {
	for i := range len(s) {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// breakerKey makes "http://svc/" and "http://svc" share a breaker.
func breakerKey(endpoint string) string { return strings.TrimRight(endpoint, "/") }

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
