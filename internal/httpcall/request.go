package httpcall

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

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
	// Undo: the call undoes a step. It goes through its endpoint's undo
	// breaker, apart from the forward calls', so that their failures
	// never refuse an undo (issue 28 §5).
	Undo bool
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
	// Tries counts the tries handed to the HTTP client. A try cut short by
	// the deadline may not have reached the service; one that reached it may
	// have been sent twice by the transport itself (Go replays a request with
	// an Idempotency-Key on a keep-alive connection that was found dead),
	// which the key makes harmless. Tries rejected by the breaker do not count.
	Tries int
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
