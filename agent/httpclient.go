package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sas-go/sas/internal/httpcall"
	"github.com/sas-go/sas/internal/sas"
)

// DefaultAttemptTimeout bounds one try of an HTTPClient call unless
// HTTPConfig.AttemptTimeout says otherwise.
const DefaultAttemptTimeout = 10 * time.Second

// HTTPConfig configures an HTTPClient. Zero fields take the defaults;
// negative ones are refused.
type HTTPConfig struct {
	// Tries bounds the tries of one call, the first included (default 5).
	Tries int
	// Backoff and MaxBackoff shape the wait before the n-th retry: drawn
	// from [0, min(MaxBackoff, Backoff·2^n)), or longer if the service's
	// Retry-After asks (defaults 100ms and 5s).
	Backoff    time.Duration
	MaxBackoff time.Duration
	// AttemptTimeout bounds one try, so a hung connection costs a try, not
	// the whole step (default DefaultAttemptTimeout).
	AttemptTimeout time.Duration
	// SafetyMargin is kept back from the context's deadline: no try starts
	// later than the deadline less the margin, which leaves the step time to
	// report (default 1s).
	SafetyMargin time.Duration
	// MaxResponseBytes bounds how much of a success's body is read (default
	// 1 MiB). A longer body is still a success: the response holds its start
	// and says it is truncated.
	MaxResponseBytes int64
	// Breaker configures the circuit breakers, one per endpoint (the
	// agent's breaker, BreakerConfig, per endpoint: it opens when, over the
	// last Window of tries, at least FailureThreshold were unhealthy, 5xx,
	// 408, 429, timeouts or network failures, and they were at least
	// FailureRate of the tries; docs/protocol.md, "Agent"). Zero fields take
	// the defaults; it cannot be turned off (a negative FailureThreshold is
	// refused).
	Breaker BreakerConfig
	// Client sends the requests. Default: a client of its own transport that
	// does not follow redirects (a redirected POST would lose its body).
	Client *http.Client
	// Clock is the only source of the time; a Clock with a Sleep method
	// also does the waits (see Clock). Default: the wall clock. The timer
	// that cuts a try in flight is always a real one.
	Clock Clock
}

// BreakerOptions is BreakerConfig, its old name for an HTTPClient's
// breakers.
//
// Deprecated: use BreakerConfig, which configures both an agent's breakers
// and an HTTPClient's (one breaker, one configuration).
type BreakerOptions = BreakerConfig

// HTTPCall is one call to a remote service.
type HTTPCall struct {
	// Endpoint is the service's base URL (http or https, no query); it
	// keys the circuit breaker. Path, which may carry a query, is appended.
	Endpoint string
	Method   string
	Path     string
	// Body is sent on every try, unchanged. With a body and no
	// Content-Type header, Content-Type is application/json.
	Body   []byte
	Header http.Header
	// IdempotencyKey is sent as the Idempotency-Key header on every try:
	// usually the Request's. Required.
	IdempotencyKey string
	// Undo: the call undoes a step (usually the Request's Undo). Undos
	// have their endpoint's breaker of their own, so that failures of the
	// forward calls never refuse an undo.
	Undo bool
}

// HTTPResponse is what a call got: the last answer's status and body. On
// error it still holds them, when there was an answer.
type HTTPResponse struct {
	Status int
	Body   []byte
	// Truncated: a success's body was longer than MaxResponseBytes; Body
	// holds its start.
	Truncated bool
	// Tries counts the tries sent (those the breaker refused are not).
	Tries int
}

// HTTPDoer makes HTTP calls for a step: *HTTPClient, or a fake in tests.
type HTTPDoer interface {
	Do(ctx context.Context, call HTTPCall) (HTTPResponse, error)
}

// HTTPClient calls remote HTTP services from a step the way an agent must:
// every try of a call sends the same body and Idempotency-Key, transient
// failures are retried with jittered backoff (honouring Retry-After), no
// try starts after the step's deadline less a safety margin, and a circuit
// breaker per endpoint stops calling a service that is down. It is safe for
// concurrent use; share one per function, so that its breakers see all the
// calls.
type HTTPClient struct {
	caller *httpcall.Caller
	clock  Clock
}

var _ HTTPDoer = (*HTTPClient)(nil)

// NewHTTPClient checks o and returns a client.
// HTTPOptions is the old name of HTTPConfig.
//
// Deprecated: use HTTPConfig; the package names every configuration
// Config.
type HTTPOptions = HTTPConfig

func NewHTTPClient(o HTTPConfig) (*HTTPClient, error) {
	if o.AttemptTimeout == 0 {
		o.AttemptTimeout = DefaultAttemptTimeout
	}
	cfg := httpcall.Config{
		MaxTries: o.Tries, BaseBackoff: o.Backoff, MaxBackoff: o.MaxBackoff,
		AttemptTimeout: o.AttemptTimeout, SafetyMargin: o.SafetyMargin, MaxResponseBytes: o.MaxResponseBytes,
		Breaker: httpcall.BreakerConfig{
			FailureThreshold: o.Breaker.FailureThreshold, FailureRate: o.Breaker.FailureRate,
			Window: o.Breaker.Window, OpenFor: o.Breaker.OpenFor,
		},
		Client: o.Client,
	}
	clock := o.Clock
	if clock == nil {
		clock = systemClock{}
	} else {
		cfg.Clock = clock
		if s, ok := clock.(interface {
			Sleep(context.Context, time.Duration) error
		}); ok {
			cfg.Sleep = s.Sleep
		}
	}
	c, err := httpcall.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("configuring the HTTP client: %w", err)
	}
	return &HTTPClient{caller: c, clock: clock}, nil
}

// Do makes the call, retrying as the options say, until the context's
// deadline (required: a step's context has one) less the safety margin.
//
// The error, if any, is one a step can return as it is:
//   - the service answered no for good (a 4xx other than 408, 429 and a
//     409 with Retry-After; a 3xx; 501; 505), or the call can never be sent
//     (a bad URL or header): permanent (see Permanent), its text quoting the
//     status and the start of the body;
//   - anything else (the tries ran out, the deadline came, the endpoint's
//     circuit is open): the attempt fails without the SDK's own in-process
//     retries, since the client made its tries. An open circuit refuses at
//     once, without a call and without waiting for the breaker to admit a
//     probe; the agent reports the attempt failed (CircuitOpen) and the
//     step's retry policy says when it runs again.
func (c *HTTPClient) Do(ctx context.Context, call HTTPCall) (HTTPResponse, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return HTTPResponse{}, Permanent(fmt.Errorf("calling %s %s%s: %w", call.Method, sas.Redact(call.Endpoint), call.Path,
			&sas.ValidationError{Field: "ctx", Reason: "a context with a deadline is required"}))
	}
	res, err := c.caller.Call(ctx, callRequest(call, deadline))
	return responseOf(res), doError(err)
}

// CircuitOpen reports whether the breaker of endpoint refuses tries now.
func (c *HTTPClient) CircuitOpen(endpoint string) bool {
	return c.caller.BreakerState(endpoint) == httpcall.BreakerOpen
}

// callRequest is call as the internal caller takes it.
func callRequest(call HTTPCall, deadline time.Time) httpcall.Request {
	h := call.Header.Clone()
	if call.Body != nil && h.Get("Content-Type") == "" {
		if h == nil {
			h = http.Header{}
		}
		h.Set("Content-Type", "application/json")
	}
	return httpcall.Request{
		Endpoint: call.Endpoint, Method: call.Method, Path: call.Path, Body: call.Body,
		IdempotencyKey: call.IdempotencyKey, Deadline: deadline, Header: h, Undo: call.Undo,
	}
}

func responseOf(r httpcall.Result) HTTPResponse {
	return HTTPResponse{Status: r.Status, Body: r.Body, Truncated: r.Truncated, Tries: r.Tries}
}

// doError marks the caller's permanent classes as permanent; the others
// keep the caller's sentinels, which the runner reads as spent.
func doError(err error) error {
	if err != nil && (errors.Is(err, httpcall.ErrPermanent) || errors.Is(err, sas.ErrInvalid)) {
		return Permanent(err)
	}
	return err
}
