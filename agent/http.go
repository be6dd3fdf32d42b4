package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/httpcall"
	"github.com/sas-go/sas/internal/sas"
)

// Route is what the HTTP agent calls for a request that carries no Action
// (one from an older scheduler): the step's action and undo, each
// "METHOD /path" as in a workflow definition. An empty Undo means the step
// has nothing to undo.
type Route struct {
	Step   string
	Action string
	Undo   string
}

// The wait for a busy idempotency key (see HTTP).
const (
	keyBusyRetries    = 5
	keyBusyBackoff    = 200 * time.Millisecond
	maxKeyBusyBackoff = 2 * time.Second
)

// TaskTokenHeader is the header in which the HTTP agent hands a step's
// completion token (Request.Token) to the service it calls. A header, not
// a body field, so that the body stays the same on every attempt (each
// attempt has a token of its own) and a service's idempotency check on
// the body is not upset by a new token.
const TaskTokenHeader = "X-Sas-Task-Token"

// HTTP returns an agent named name whose every step is one HTTP call to the
// service at baseURL, made with client (an *HTTPClient):
//
//   - what to call: the request's Action ("POST /payments"; its undo text
//     for a compensation) against baseURL; for a request without an Action
//     (an older scheduler), the step's Route;
//   - the body: the payload object's fields plus "orderId" and "step" (the
//     step's name), which win over payload fields of the same name; keys
//     sorted, compacted, not HTML-escaped. It depends only on the order
//     and the step, so every retry and redelivery sends the same bytes
//     under the same key;
//   - headers: Idempotency-Key (the request's), Content-Type and Accept
//     application/json, and, for a step that waits for the service to
//     complete it (Request.Token), X-Sas-Task-Token (TaskTokenHeader):
//     the service completes the step with it (package completion);
//   - the result: the service's answer (JSON as it is, other text as a
//     JSON string);
//   - a 4xx is a permanent failure whose reason quotes the service's error
//     (its "error" object's type, code and message, or its "message");
//   - a 409 with Retry-After says the key is busy with a duplicate request
//     in flight: once the client's tries end on it, the agent waits
//     (doubling from 200ms to 2s, jittered) and calls again, up to 5
//     times, for the stored answer;
//   - the undo of a step whose Route has no Undo is done, with no call.
//
// Mistakes (a bad base URL or route, a nil client) are reported by the
// agent's Err, and so by NewHandler.
func HTTP(name, baseURL string, client HTTPDoer, routes ...Route) *Agent {
	// The client has a breaker per endpoint (HTTPConfig.Breaker): one of
	// the SDK's around it would count the same outage twice.
	a := New(name, Breaker(BreakerConfig{FailureThreshold: -1}))
	h := &httpStep{agent: name, base: baseURL, client: client, routes: map[string]compiledRoute{}}
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		a.fail("baseURL", fmt.Sprintf("%q is not an absolute http(s) base URL without query", sas.Redact(baseURL)))
	}
	if client == nil {
		a.fail("client", "required")
	}
	for _, rt := range routes {
		act, err := parseAction(rt.Action)
		if err != nil {
			a.errs = append(a.errs, fmt.Errorf("agent %q, step %q: %w", name, rt.Step, err))
			continue
		}
		c := compiledRoute{action: act}
		if rt.Undo != "" {
			undo, err := parseAction(rt.Undo)
			if err != nil {
				a.errs = append(a.errs, fmt.Errorf("agent %q, step %q undo: %w", name, rt.Step, err))
				continue
			}
			c.undo = &undo
		}
		if _, dup := h.routes[rt.Step]; dup || rt.Step == "" {
			a.fail("routes", fmt.Sprintf("step %q: a route needs a step name, once", rt.Step))
		}
		h.routes[rt.Step] = c
	}
	a.http = h
	// One Func for do and undo: the request says which (Action, Undo).
	// The client made its tries; a busy key is waited out here. So a
	// failure that reaches the runner is not worth trying again at once.
	return a.Default(h.run, h.run)
}

// RejectStatuses makes an HTTP agent (HTTP) report the service's answers
// with these statuses as business rejections (Reject) instead of permanent
// failures: a 402 for a declined card, a 422 for an expense over budget.
// The order is compensated as for any failure, then ends Rejected, and no
// operator is alerted. Only 4xx statuses are answers the service will not
// change (a 5xx is transient); a 409 with Retry-After is a busy key, never
// a rejection. An undo's answer is never a rejection. Statuses outside
// 400–499, or an agent not built by HTTP, are mistakes Err reports. It
// returns a, so that calls chain.
func (a *Agent) RejectStatuses(statuses ...int) *Agent {
	if a.http == nil {
		a.fail("RejectStatuses", "only an HTTP agent (agent.HTTP) reads statuses")
		return a
	}
	for _, st := range statuses {
		if st < 400 || st > 499 {
			a.fail("RejectStatuses", fmt.Sprintf("%d: only a 4xx answer can be a rejection", st))
			continue
		}
		a.http.reject = append(a.http.reject, st)
	}
	return a
}

// httpStep runs the HTTP agent's steps.
type httpStep struct {
	agent  string
	base   string
	client HTTPDoer
	routes map[string]compiledRoute
	reject []int // statuses that are business rejections (RejectStatuses)
}

type compiledRoute struct {
	action endpointAction
	undo   *endpointAction // nil: nothing to undo
}

func (h *httpStep) run(ctx context.Context, req Request) (any, error) {
	act, ok, err := h.action(req)
	if err != nil || !ok {
		return nil, err // !ok: nothing to undo, a finished undo
	}
	body, err := requestBody(req)
	if err != nil {
		return nil, permanentf(err, "%s for order %s: %v", act, req.OrderID, err)
	}
	call := HTTPCall{
		Endpoint: h.base, Method: act.Method, Path: act.Path, Body: body, IdempotencyKey: req.IdempotencyKey,
		Header: http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"}}, Undo: req.Undo,
	}
	if req.Token != "" {
		call.Header.Set(TaskTokenHeader, req.Token)
	}
	for n := 0; ; n++ {
		res, err := h.client.Do(ctx, call)
		if err == nil {
			return json.RawMessage(res.Body), nil
		}
		// A 409 with Retry-After says another request with this key is
		// still being processed (the IETF Idempotency-Key draft): a
		// duplicate delivery racing the first. Its answer will be stored
		// under the key, so ask again rather than report a failure that
		// did not happen. The client already asked again, but only within
		// its tries and their short backoff.
		if !keyBusy(err) {
			return nil, h.classify(act, req.IdempotencyKey, res, err)
		}
		if n >= keyBusyRetries {
			return nil, fmt.Errorf("%s with key %s: still in use by another request after %d tries: %w", act, req.IdempotencyKey, n+1, err)
		}
		// The next call refuses to start past the deadline (less its
		// margin), so a wait that runs long ends in "no outcome", never in
		// a call the step no longer owns.
		if err := httpcall.Sleep(ctx, busyWait(keyBusyBackoff, n)); err != nil {
			return nil, fmt.Errorf("%s with key %s: waiting for the key to be free: %w", act, req.IdempotencyKey, err)
		}
	}
}

// action is what req asks to call; ok is false for the undo of a step that
// has none (nothing to call, a finished undo).
func (h *httpStep) action(req Request) (act endpointAction, ok bool, err error) {
	if req.Action != "" {
		act, err := parseAction(req.Action)
		if err != nil {
			return act, false, permanentf(err, "agent %q, step %q: %v", h.agent, req.Step, err)
		}
		return act, true, nil
	}
	rt, found := h.routes[req.Step]
	switch {
	case !found:
		return act, false, permanentf(nil, "agent %q has no action for step %q (it serves: %s)", h.agent, req.Step, routeNames(h.routes))
	case !req.Undo:
		return rt.action, true, nil
	case rt.undo == nil:
		// Nothing to undo is a finished undo: saying so lets the
		// compensation move on to the previous step.
		return act, false, nil
	}
	return *rt.undo, true, nil
}

// classify turns a failed call into the step's error: permanent answers
// become a permanent failure whose reason quotes the service.
func (h *httpStep) classify(act endpointAction, key string, res HTTPResponse, err error) error {
	switch {
	case errors.Is(err, httpcall.ErrPermanent):
		var se *httpcall.StatusError
		if errors.As(err, &se) {
			pe := permanentf(err, "%s %s answered %s", h.agent, act, describeAnswer(se, res.Body))
			pe.rejected = slices.Contains(h.reject, se.Status)
			return pe
		}
		return permanentf(err, "%s %s: %v", h.agent, act, err)
	case errors.Is(err, sas.ErrInvalid):
		// A request that could never be sent: only a bad key or header can
		// get here, since HTTP checked the base URL and the action parsed.
		return permanentf(err, "%s %s: request cannot be sent: %v", h.agent, act, err)
	}
	return fmt.Errorf("%s %s with key %s: %w", h.agent, act, key, err)
}

// keyBusy reports whether err is the service's "key in progress" answer (a
// 409 with Retry-After, httpcall.ErrKeyInUse) that was still the answer when
// the client ran out of tries. A bare 409 is a genuine conflict, reported as a
// permanent failure: waiting it out would end in a give-up and the undo of a
// step that never took effect. A call stopped by the deadline is not busy
// either: nothing more may be sent.
func keyBusy(err error) bool {
	return errors.Is(err, httpcall.ErrKeyInUse) && errors.Is(err, httpcall.ErrTransient) &&
		!errors.Is(err, httpcall.ErrDeadline)
}

// busyWait is the n-th wait for a busy key: doubling, capped, with jitter in
// [d/2, d] so duplicates that collided once do not collide again.
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
// excerpt the client kept.
func describeAnswer(se *httpcall.StatusError, body []byte) string {
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
func requestBody(req Request) ([]byte, error) {
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
	if fields["step"], err = sas.Marshal(req.Step); err != nil {
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

// endpointAction is a parsed "METHOD /path".
type endpointAction struct {
	Method string
	Path   string
}

func (a endpointAction) String() string { return a.Method + " " + a.Path }

// parseAction reads "METHOD /path" (the path may carry a query).
func parseAction(s string) (endpointAction, error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return endpointAction{}, &sas.ValidationError{Field: "action", Reason: fmt.Sprintf("%q: want \"METHOD /path\", e.g. \"POST /payments\"", s)}
	}
	m, p := f[0], f[1]
	if m != strings.ToUpper(m) || !validMethod(m) {
		return endpointAction{}, &sas.ValidationError{Field: "action", Reason: fmt.Sprintf("%q: %q is not an upper-case HTTP method", s, m)}
	}
	if !strings.HasPrefix(p, "/") {
		return endpointAction{}, &sas.ValidationError{Field: "action", Reason: fmt.Sprintf("%q: the path must start with /", s)}
	}
	return endpointAction{Method: m, Path: p}, nil
}

// validMethod accepts the methods a remote call can sensibly use. GET and
// HEAD are left out on purpose: the agent always sends a body.
func validMethod(m string) bool {
	switch m {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// routeNames lists the steps the routes name, for messages.
func routeNames(rs map[string]compiledRoute) string {
	if len(rs) == 0 {
		return "only requests that carry their action"
	}
	names := make([]string, 0, len(rs))
	for n := range rs {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
