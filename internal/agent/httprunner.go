package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/httpagent"
	"github.com/sas-go/sas/internal/sas"
)

// Caller makes one step's remote call with retries, backoff, breaker and
// deadline; *httpagent.Caller is the implementation.
type Caller interface {
	Call(ctx context.Context, r httpagent.Request) (httpagent.Result, error)
}

var _ Caller = (*httpagent.Caller)(nil)

// Defaults for the wait on a busy idempotency key (see HTTPRunner.Run).
const (
	DefaultKeyBusyRetries = 5
	DefaultKeyBusyBackoff = 200 * time.Millisecond
	maxKeyBusyBackoff     = 2 * time.Second
)

// HTTPRunnerConfig configures an HTTPRunner.
type HTTPRunnerConfig struct {
	// Agent is the agent's name, for messages (e.g. "payments").
	Agent string
	// Endpoint is the service's base URL (SAS_PAYMENTS_URL for payments).
	Endpoint string
	// Routes gives each step's Action and Undo. Checked by NewHTTPRunner.
	Routes Routes
	// Caller makes the calls. Required.
	Caller Caller
	// KeyBusyRetries bounds how often a call is repeated after the service
	// said the key is in use by another request (409). Default 5.
	KeyBusyRetries int
	// KeyBusyBackoff is the first wait after a 409; it doubles up to 2s.
	// Default 200ms.
	KeyBusyBackoff time.Duration
	// Sleep waits d or until ctx ends. Default: httpagent.Sleep, a timer.
	// Tests pass the fake clock's.
	Sleep func(ctx context.Context, d time.Duration) error
}

// HTTPRunner runs a step as one HTTP call to a remote service:
//
//   - the request: the step's Action, or its Undo for a compensation, against
//     Endpoint; the body is the order's payload object with "orderId" and
//     "step" (the step's name) set by the agent; the Idempotency-Key header is
//     the request's key; the deadline is the context's, which the Service
//     sets to the agent's deadline for the request (Deadline: its TimeoutMs
//     from when it started it), or the invocation's end less the reply
//     reserve if that comes first; without a context deadline, CompleteBy;
//   - the body depends only on the order and the step, never on the attempt,
//     so every retry, re-drive and duplicate delivery sends the same bytes
//     under the same key, which an idempotent service requires;
//   - the result is the service's JSON answer.
//
// Errors: a permanent answer (4xx) is a *PermanentError whose reason quotes
// the service; running out of time or tries, or an open breaker, is returned
// as httpagent reported it (the Service sends nothing for those and leaves the
// request for redelivery).
type HTTPRunner struct {
	agent    string
	endpoint string
	routes   map[string]compiledRoute
	caller   Caller
	retries  int
	backoff  time.Duration
	sleep    func(context.Context, time.Duration) error
}

type compiledRoute struct {
	action endpointAction
	undo   *endpointAction // nil: nothing to undo
}

var _ Runner = (*HTTPRunner)(nil)

// NewHTTPRunner checks cfg: a bad endpoint or action fails at start-up, not
// on the first order that needs it.
func NewHTTPRunner(cfg HTTPRunnerConfig) (*HTTPRunner, error) {
	invalid := func(field, reason string) (*HTTPRunner, error) {
		return nil, fmt.Errorf("configuring agent %q: %w", cfg.Agent, &sas.ValidationError{Field: field, Reason: reason})
	}
	if cfg.Agent == "" {
		return invalid("Agent", "required")
	}
	if cfg.Caller == nil {
		return invalid("Caller", "required")
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return invalid("Endpoint", fmt.Sprintf("%q is not an absolute http(s) base URL without query", cfg.Endpoint))
	}
	if len(cfg.Routes) == 0 {
		return invalid("Routes", "no steps: the agent would have nothing to do")
	}
	if cfg.KeyBusyRetries < 0 || cfg.KeyBusyBackoff < 0 {
		return invalid("KeyBusy", "must not be negative")
	}
	r := &HTTPRunner{
		agent: cfg.Agent, endpoint: cfg.Endpoint, caller: cfg.Caller,
		routes:  make(map[string]compiledRoute, len(cfg.Routes)),
		retries: cfg.KeyBusyRetries, backoff: cfg.KeyBusyBackoff, sleep: cfg.Sleep,
	}
	if r.retries == 0 {
		r.retries = DefaultKeyBusyRetries
	}
	if r.backoff == 0 {
		r.backoff = DefaultKeyBusyBackoff
	}
	if r.sleep == nil {
		r.sleep = httpagent.Sleep
	}
	for step, rt := range cfg.Routes {
		a, err := parseAction(rt.Action)
		if err != nil {
			return nil, fmt.Errorf("configuring agent %q, step %q: %w", cfg.Agent, step, err)
		}
		c := compiledRoute{action: a}
		if rt.Undo != "" {
			u, err := parseAction(rt.Undo)
			if err != nil {
				return nil, fmt.Errorf("configuring agent %q, step %q undo: %w", cfg.Agent, step, err)
			}
			c.undo = &u
		}
		r.routes[step] = c
	}
	return r, nil
}

// Run makes the step's call. See HTTPRunner.
func (r *HTTPRunner) Run(ctx context.Context, req sas.AgentRequest) (json.RawMessage, error) {
	rt, ok := r.routes[req.StepName]
	if !ok {
		return nil, &PermanentError{Reason: fmt.Sprintf("agent %q has no action for step %q (it serves: %s)", r.agent, req.StepName, routeNames(r.routes))}
	}
	act := &rt.action
	if req.Compensation {
		if rt.undo == nil {
			// Nothing to undo is a finished undo: saying so lets the
			// compensation move on to the previous step.
			return nil, nil
		}
		act = rt.undo
	}
	body, err := requestBody(req)
	if err != nil {
		return nil, &PermanentError{Reason: fmt.Sprintf("%s for order %s: %v", act, req.OrderID, err), Err: err}
	}
	key := req.IdempotencyKey
	if key == "" {
		key = sas.IdempotencyKey(req.OrderID, req.Step, 0, req.Compensation)
	}
	deadline := req.CompleteBy
	if dl, ok := ctx.Deadline(); ok {
		// The Service's: the agent's own deadline, counted from when it
		// started the request, not the lease's CompleteBy, which a request
		// that waited in the queue may have passed already.
		deadline = dl
	}
	hr := httpagent.Request{
		Endpoint: r.endpoint, Method: act.Method, Path: act.Path, Body: body,
		IdempotencyKey: key, Deadline: deadline,
		Header: http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"}},
	}

	for n := 0; ; n++ {
		res, err := r.caller.Call(ctx, hr)
		if err == nil {
			return resultOf(res.Body), nil
		}
		// A 409 with Retry-After says another request with this key is
		// still being processed (the IETF Idempotency-Key draft; the
		// simulator): a duplicate delivery racing the first. The answer
		// will be stored under the key, so ask again rather than report a
		// failure that did not happen. httpagent already asks again, but
		// only MaxAttempts times with its own (short) backoff.
		if !keyBusy(err) {
			return nil, r.classify(act, key, res, err)
		}
		if n >= r.retries {
			return nil, fmt.Errorf("%s with key %s: still in use by another request after %d tries: %w", act, key, n+1, err)
		}
		wait := busyWait(r.backoff, n)
		// The next Call refuses to start past the deadline (less its
		// margin), so a wait that runs long ends in "no outcome", never in
		// a call the step no longer owns.
		if err := r.sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("%s with key %s: waiting for the key to be free: %w", act, key, err)
		}
	}
}

// classify turns a failed Call into the runner's error: permanent answers
// become a *PermanentError with a reason that quotes the service.
func (r *HTTPRunner) classify(act *endpointAction, key string, res httpagent.Result, err error) error {
	switch {
	case errors.Is(err, httpagent.ErrPermanent):
		var se *httpagent.StatusError
		if errors.As(err, &se) {
			return &PermanentError{Reason: fmt.Sprintf("%s %s answered %s", r.agent, act, describeAnswer(se, res.Body)), Err: err}
		}
		return &PermanentError{Reason: fmt.Sprintf("%s %s: %v", r.agent, act, err), Err: err}
	case errors.Is(err, sas.ErrInvalid):
		// A request that could never be sent: only a bad key or header can
		// get here, since NewHTTPRunner checked the endpoint and action.
		return &PermanentError{Reason: fmt.Sprintf("%s %s: request cannot be sent: %v", r.agent, act, err), Err: err}
	}
	return fmt.Errorf("%s %s with key %s: %w", r.agent, act, key, err)
}

// keyBusy reports whether err is the service's "key in progress" answer (a
// 409 with Retry-After, httpagent.ErrKeyInUse) that was still the answer when
// httpagent ran out of tries. A bare 409 is a genuine conflict, reported as a
// permanent failure: waiting it out would end in a give-up and the undo of a
// step that never took effect. A Call stopped by the deadline is not busy
// either: nothing more may be sent.
func keyBusy(err error) bool {
	return errors.Is(err, httpagent.ErrKeyInUse) && errors.Is(err, httpagent.ErrTransient) &&
		!errors.Is(err, httpagent.ErrDeadline)
}

// busyWait is the n-th wait for a busy key: doubling, capped, with jitter in
// [d/2, d) so duplicates that collided once do not collide again.
func busyWait(base time.Duration, n int) time.Duration {
	d := base
	for range n {
		if d >= maxKeyBusyBackoff/2 {
			d = maxKeyBusyBackoff
			break
		}
		d *= 2
	}
	d = min(d, maxKeyBusyBackoff)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// describeAnswer renders a non-2xx answer for a person: the status and, when
// the body is a common JSON error shape, its type and message; otherwise the
// excerpt httpagent kept.
func describeAnswer(se *httpagent.StatusError, body []byte) string {
	status := fmt.Sprintf("HTTP %d", se.Status)
	if t := http.StatusText(se.Status); t != "" {
		status += " " + t
	}
	var shaped struct {
		Error json.RawMessage `json:"error"`
		// Top-level message, as many services send.
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &shaped) == nil {
		var detail struct {
			Type    string `json:"type"`
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(shaped.Error, &detail) == nil && (detail.Message != "" || detail.Type != "" || detail.Code != ""):
			parts := []string{}
			for _, p := range []string{detail.Type, detail.Code, detail.Message} {
				if p != "" {
					parts = append(parts, p)
				}
			}
			return status + ": " + strings.Join(parts, ": ")
		case json.Unmarshal(shaped.Error, &s) == nil && s != "":
			return status + ": " + s
		case shaped.Message != "":
			return status + ": " + shaped.Message
		}
	}
	return se.Error()
}

// requestBody is the call's JSON body: the payload's fields, then "orderId"
// and "step" set by the agent (they win over payload fields of the same
// name, so the service always sees the order the key belongs to). Keys come
// out sorted and values compacted, so the same order step gives the same
// bytes however the payload was spaced or ordered.
func requestBody(req sas.AgentRequest) ([]byte, error) {
	fields := map[string]json.RawMessage{}
	if p := strings.TrimSpace(string(req.Payload)); p != "" && p != "null" {
		if p[0] != '{' {
			return nil, errors.New("the payload must be a JSON object")
		}
		if err := json.Unmarshal(req.Payload, &fields); err != nil {
			return nil, fmt.Errorf("reading the payload: %w", err)
		}
	}
	var err error
	if fields["orderId"], err = sas.Marshal(req.OrderID); err != nil {
		return nil, fmt.Errorf("encoding orderId: %w", err)
	}
	if fields["step"], err = sas.Marshal(req.StepName); err != nil {
		return nil, fmt.Errorf("encoding step: %w", err)
	}
	// Map keys sorted; RawMessage compacted; no HTML escaping, so the body is
	// no larger than the payload plus these two fields.
	b, err := sas.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("encoding the body: %w", err)
	}
	return b, nil
}

// resultOf makes a success body a valid reply result: empty is no result,
// JSON passes through, anything else is carried as a JSON string so the
// scheduler still sees what the service said.
func resultOf(body []byte) json.RawMessage {
	s := strings.TrimSpace(string(body))
	switch {
	case s == "":
		return nil
	case json.Valid([]byte(s)):
		return json.RawMessage(s)
	}
	b, _ := sas.Marshal(s) // a string always encodes
	return b
}

// routeNames lists the steps an agent serves, for messages.
func routeNames(rs map[string]compiledRoute) string {
	names := make([]string, 0, len(rs))
	for n := range rs {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
