package agent_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/sas"
)

// call is what a test service received.
type call struct {
	Method, Path, Key, ContentType, Body string
}

// service is a test HTTP service that records its calls and answers with
// answer (200 {"ok":true} when nil).
type service struct {
	mu     sync.Mutex
	calls  []call
	answer func(w http.ResponseWriter, r *http.Request, n int)
	srv    *httptest.Server
}

func newService(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, n int)) *service {
	t.Helper()
	s := &service{answer: answer}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.calls = append(s.calls, call{Method: r.Method, Path: r.URL.RequestURI(), Key: r.Header.Get("Idempotency-Key"),
			ContentType: r.Header.Get("Content-Type"), Body: string(b)})
		n := len(s.calls)
		s.mu.Unlock()
		if s.answer != nil {
			s.answer(w, r, n)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *service) received() []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]call(nil), s.calls...)
}

func newClient(t *testing.T) *agent.HTTPClient {
	t.Helper()
	c, err := agent.NewHTTPClient(agent.HTTPConfig{Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, SafetyMargin: 10 * time.Millisecond})
	require.NoError(t, err)
	return c
}

// wallRequest is request() on the wall clock, for tests that make real
// calls (an HTTP client's tries are timed by real timers).
func wallRequest(orderID string, opts ...func(*sas.AgentRequest)) sas.AgentRequest {
	return request(orderID, append([]func(*sas.AgentRequest){func(r *sas.AgentRequest) { r.CompleteBy = time.Now().Add(time.Minute) }}, opts...)...)
}

func wallHandler(t *testing.T, f *fixture, agents ...*agent.Agent) *agent.Handler {
	t.Helper()
	cfg := f.config(agents...)
	cfg.Clock = nil
	h, err := agent.NewHandler(cfg)
	require.NoError(t, err)
	return h
}

// The HTTP agent calls the request's Action against its base URL, with the
// request's key and the payload plus orderId and step as the body; the
// undo calls the undo's Action under the undo's key. The service's answer
// is the result.
func TestHTTPAgentCallsTheRequestsAction(t *testing.T) {
	t.Parallel()
	svc := newService(t, nil)
	f := newFixture(t)
	a := agent.HTTP("flights", svc.srv.URL+"/api", newClient(t))
	resp := f.handle(wallHandler(t, f, a), event(wallRequest("o-1")))
	require.Empty(t, resp.BatchItemFailures)
	resp = f.handle(wallHandler(t, f, a), event(wallRequest("o-1", undo)))
	require.Empty(t, resp.BatchItemFailures)

	require.Equal(t, []call{
		{Method: "POST", Path: "/api/reservations", Key: "o-1:1", ContentType: "application/json",
			Body: `{"flight":"FL123","orderId":"o-1","seats":2,"step":"reserve-flight"}`},
		{Method: "POST", Path: "/api/reservations/cancel", Key: "o-1:1:undo", ContentType: "application/json",
			Body: `{"flight":"FL123","orderId":"o-1","seats":2,"step":"reserve-flight"}`},
	}, svc.received())
	for _, rep := range f.replies() {
		require.Equal(t, sas.OutcomeDone, rep.Outcome)
		require.JSONEq(t, `{"ok":true}`, string(rep.Result))
	}
}

// Without an Action (an older scheduler) the HTTP agent falls back on its
// routes; an undo whose route has none is done without a call; a step with
// neither is a permanent failure.
func TestHTTPAgentFallsBackOnRoutes(t *testing.T) {
	t.Parallel()
	svc := newService(t, nil)
	f := newFixture(t)
	a := agent.HTTP("flights", svc.srv.URL, newClient(t),
		agent.Route{Step: "reserve-flight", Action: "PUT /seats", Undo: "DELETE /seats"},
		agent.Route{Step: "notify", Action: "POST /notifications"})
	older := func(r *sas.AgentRequest) { r.Action = "" }
	h := wallHandler(t, f, a)
	f.handle(h, event(wallRequest("o-do", older)))
	f.handle(h, event(wallRequest("o-undo", undo, older)))
	f.handle(h, event(wallRequest("o-notify-undo", step("notify"), undo, older)))
	f.handle(h, event(wallRequest("o-unknown", step("gift-wrap"), older)))

	require.Equal(t, []string{"PUT /seats", "DELETE /seats"}, []string{
		svc.received()[0].Method + " " + svc.received()[0].Path, svc.received()[1].Method + " " + svc.received()[1].Path})
	require.Len(t, svc.received(), 2, "nothing to undo, nothing called")
	byOrder := map[string]sas.AgentReply{}
	for _, rep := range f.replies() {
		byOrder[rep.OrderID] = rep
	}
	require.Equal(t, sas.OutcomeDone, byOrder["o-do"].Outcome)
	require.Equal(t, sas.OutcomeDone, byOrder["o-undo"].Outcome)
	require.Equal(t, sas.OutcomeDone, byOrder["o-notify-undo"].Outcome)
	require.Equal(t, sas.OutcomeFailed, byOrder["o-unknown"].Outcome)
	require.Equal(t, `agent "flights" has no action for step "gift-wrap" (it serves: notify, reserve-flight)`, byOrder["o-unknown"].Reason)
}

// A 4xx is a permanent failure quoting the service; a 5xx that persists is
// no outcome after the client's tries, without the SDK's own tries on top.
func TestHTTPAgentClassifiesAnswers(t *testing.T) {
	t.Parallel()
	svc := newService(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		if r.Header.Get("Idempotency-Key") == "o-declined:1" {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"error":{"type":"sold_out","message":"flight FL123 is full"}}`)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	f := newFixture(t)
	client, err := agent.NewHTTPClient(agent.HTTPConfig{Tries: 2, Backoff: time.Millisecond, SafetyMargin: 10 * time.Millisecond})
	require.NoError(t, err)
	a := agent.HTTP("flights", svc.srv.URL, client)
	resp := f.handle(wallHandler(t, f, a), event(wallRequest("o-declined"), wallRequest("o-down")))
	require.Equal(t, []string{"m2"}, failedIDs(resp))
	reps := f.replies()
	require.Len(t, reps, 1)
	require.Equal(t, sas.OutcomeFailed, reps[0].Outcome)
	require.Equal(t, "flights POST /reservations answered HTTP 422 Unprocessable Entity: sold_out: flight FL123 is full", reps[0].Reason)

	down := 0
	for _, c := range svc.received() {
		if c.Key == "o-down:1" {
			down++
		}
	}
	require.Equal(t, 2, down, "the client's two tries; the SDK does not repeat them")
	require.Contains(t, f.logs.String(), "transient failure")
}

// An Action that is not "METHOD /path" is a permanent failure of that
// request, not of the agent.
func TestHTTPAgentRefusesABadAction(t *testing.T) {
	t.Parallel()
	svc := newService(t, nil)
	f := newFixture(t)
	a := agent.HTTP("flights", svc.srv.URL, newClient(t))
	f.handle(wallHandler(t, f, a), event(wallRequest("o-1", func(r *sas.AgentRequest) { r.Action = "reserve it" })))
	reps := f.replies()
	require.Len(t, reps, 1)
	require.Equal(t, sas.OutcomeFailed, reps[0].Outcome)
	require.Contains(t, reps[0].Reason, `step "reserve-flight": invalid action: "reserve it"`)
	require.Empty(t, svc.received())
}

// The HTTP agent's configuration is checked when the handler is built.
func TestHTTPAgentChecksItsConfiguration(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	client := newClient(t)
	for name, a := range map[string]*agent.Agent{
		"no base URL": agent.HTTP("flights", "", client),
		"relative":    agent.HTTP("flights", "flights.local", client),
		"query":       agent.HTTP("flights", "http://h/?a=1", client),
		"ftp":         agent.HTTP("flights", "ftp://h/", client),
		"no client":   agent.HTTP("flights", "http://h", nil),
		"bad action":  agent.HTTP("flights", "http://h", client, agent.Route{Step: "s", Action: "reserve it"}),
		"bad undo":    agent.HTTP("flights", "http://h", client, agent.Route{Step: "s", Action: "POST /s", Undo: "cancel"}),
		"GET":         agent.HTTP("flights", "http://h", client, agent.Route{Step: "s", Action: "GET /s"}),
		"route twice": agent.HTTP("flights", "http://h", client, agent.Route{Step: "s", Action: "POST /s"}, agent.Route{Step: "s", Action: "POST /t"}),
		"no name":     agent.HTTP("", "http://h", client),
	} {
		require.ErrorIs(t, a.Err(), sas.ErrInvalid, name)
		_, err := agent.NewHandler(f.config(a))
		require.ErrorIs(t, err, sas.ErrInvalid, name)
	}
	ok := agent.HTTP("flights", "http://h/api", client, agent.Route{Step: "s", Action: "POST /s?x=1", Undo: "DELETE /s"})
	require.NoError(t, ok.Err())
}

// The HTTP client: a call needs a deadline; a 4xx is permanent (a step can
// return it as it is); the breaker opens on an endpoint that keeps failing
// and then refuses tries without sending them.
func TestHTTPClient(t *testing.T) {
	t.Parallel()
	svc := newService(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusBadGateway)
	})
	client, err := agent.NewHTTPClient(agent.HTTPConfig{Tries: 1, SafetyMargin: time.Millisecond,
		Breaker: agent.BreakerConfig{FailureThreshold: 2, FailureRate: 0.5, OpenFor: time.Minute}})
	require.NoError(t, err)

	_, err = client.Do(context.Background(), agent.HTTPCall{Endpoint: svc.srv.URL, Method: "POST", Path: "/x", IdempotencyKey: "k"})
	require.ErrorContains(t, err, "deadline")
	a := agent.New("t").Step("s", func(ctx context.Context, req agent.Request) (any, error) {
		res, err := client.Do(ctx, agent.HTTPCall{Endpoint: svc.srv.URL, Method: "POST", Path: "/missing", IdempotencyKey: req.IdempotencyKey})
		require.Equal(t, http.StatusNotFound, res.Status, "the answer is kept on error")
		return nil, err
	}, nil)
	out := a.Run(context.Background(), agent.Request{OrderID: "o-1", Step: "s", IdempotencyKey: "o-1:0"})
	require.Equal(t, agent.StatusFailed, out.Status)
	require.Contains(t, out.Reason, "HTTP 404")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 2 {
		_, err := client.Do(ctx, agent.HTTPCall{Endpoint: svc.srv.URL, Method: "POST", Path: "/flaky", IdempotencyKey: "k2", Body: []byte(`{}`)})
		require.Error(t, err)
	}
	require.True(t, client.CircuitOpen(svc.srv.URL))
	before := len(svc.received())
	res, err := client.Do(ctx, agent.HTTPCall{Endpoint: svc.srv.URL, Method: "POST", Path: "/flaky", IdempotencyKey: "k2"})
	require.ErrorContains(t, err, "circuit open")
	require.Zero(t, res.Tries)
	require.Len(t, svc.received(), before, "refused without sending")
	require.Equal(t, "application/json", svc.received()[before-1].ContentType, "a body goes as JSON unless told otherwise")
}

// Run runs a request through an agent without queues, as the handler
// would.
func TestRun(t *testing.T) {
	t.Parallel()
	a := agent.New("flights", agent.Tries(2), agent.Backoff(time.Millisecond, time.Millisecond)).
		Step("reserve-flight", func(_ context.Context, req agent.Request) (any, error) {
			switch req.OrderID {
			case "o-full":
				return nil, agent.Permanent(nil)
			case "o-later":
				return nil, agent.RetryAfter(time.Hour, nil)
			case "o-flaky":
				return nil, io.ErrUnexpectedEOF
			}
			return json.RawMessage(`{"r":1}`), nil
		}, nil)
	req := func(id string) agent.Request { return agent.Request{OrderID: id, Step: "reserve-flight"} }
	ctx := context.Background()

	require.Equal(t, agent.Outcome{Status: agent.StatusDone, Result: json.RawMessage(`{"r":1}`)}, a.Run(ctx, req("o-1")))
	out := a.Run(ctx, req("o-full"))
	require.Equal(t, agent.StatusFailed, out.Status)
	require.Equal(t, "permanent failure", out.Reason)
	out = a.Run(ctx, req("o-later"))
	require.Equal(t, agent.StatusTransient, out.Status)
	require.Equal(t, time.Hour, out.RetryAfter)
	out = a.Run(ctx, req("o-flaky"))
	require.Equal(t, agent.StatusTransient, out.Status)
	require.ErrorIs(t, out.Err, io.ErrUnexpectedEOF)
	require.ErrorContains(t, out.Err, "no outcome after 2 tries")
	out = a.Run(ctx, agent.Request{OrderID: "o-2", Step: "cancel-flight"})
	require.Equal(t, agent.StatusFailed, out.Status)
	require.Contains(t, out.Reason, `no step "cancel-flight"`)
}
