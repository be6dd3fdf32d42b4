package builtinagent_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/builtinagent"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/memstore"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
)

// The fences of the deployment's own agent (docs/trust.md): https only
// unless a local run says otherwise, an auth header read from a secret,
// and only the actions its workflows define.

// recordingClient answers every call with 200 {} and keeps what it was asked.
type recordingClient struct {
	mu    sync.Mutex
	calls []agent.HTTPCall
}

func (c *recordingClient) Do(_ context.Context, call agent.HTTPCall) (agent.HTTPResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, call)
	return agent.HTTPResponse{Status: http.StatusOK, Body: []byte(`{}`), Tries: 1}, nil
}

func (c *recordingClient) taken() []agent.HTTPCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = nil
	return out
}

var refCfg = config.Config{StepTimeout: time.Minute}

func TestHTTPBaseURLOnlyWithTheLocalFlag(t *testing.T) {
	t.Parallel()
	c := &recordingClient{}
	for _, base := range []string{"http://payments.internal", "http://127.0.0.1:8090"} {
		_, err := builtinagent.Agent(refCfg, builtinagent.Deps{Client: c, BaseURL: base})
		require.ErrorIs(t, err, sas.ErrInvalid, base)
		require.ErrorContains(t, err, "https:// services only")
		require.ErrorContains(t, err, builtinagent.EnvAllowHTTP, "the error says how a local run allows it")

		_, err = builtinagent.Agent(refCfg, builtinagent.Deps{Client: c, BaseURL: base, AllowHTTP: true})
		require.NoError(t, err, base)
	}
	// SAS_PAYMENTS_URL, the older name, is held to the same rule.
	_, err := builtinagent.Agent(config.Config{StepTimeout: time.Minute, PaymentsURL: "http://payments.internal"}, builtinagent.Deps{Client: c})
	require.ErrorIs(t, err, sas.ErrInvalid)
	_, err = builtinagent.Agent(refCfg, builtinagent.Deps{Client: c, BaseURL: "https://payments.example.com/v1"})
	require.NoError(t, err)
}

// fakeSecrets serves secret values by ARN and counts the reads.
type fakeSecrets struct {
	values map[string]string
	reads  int
}

func (f *fakeSecrets) Value(_ context.Context, arn string) (string, error) {
	f.reads++
	v, ok := f.values[arn]
	if !ok {
		return "", fmt.Errorf("reading %s: AccessDeniedException", arn)
	}
	return v, nil
}

const tokenARN = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:payments-token-AbCdEf"

func TestDepsFromEnv(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) config.Getenv {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	secrets := &fakeSecrets{values: map[string]string{tokenARN: "Bearer t0ken"}}

	d, err := builtinagent.DepsFromEnv(t.Context(), env(builtinagent.EnvName, "flights", builtinagent.EnvBaseURL, "https://f.example"), secrets)
	require.NoError(t, err)
	require.Equal(t, builtinagent.Deps{Name: "flights", BaseURL: "https://f.example"}, d)
	require.Zero(t, secrets.reads, "no secret named, none read")

	d, err = builtinagent.DepsFromEnv(t.Context(), env(builtinagent.EnvAllowHTTP, "true"), secrets)
	require.NoError(t, err)
	require.True(t, d.AllowHTTP)
	_, err = builtinagent.DepsFromEnv(t.Context(), env(builtinagent.EnvAllowHTTP, "yes please"), secrets)
	require.ErrorContains(t, err, builtinagent.EnvAllowHTTP)

	d, err = builtinagent.DepsFromEnv(t.Context(), env(builtinagent.EnvAuthSecret, tokenARN), secrets)
	require.NoError(t, err)
	require.Equal(t, &builtinagent.Auth{Header: "Authorization", Value: "Bearer t0ken"}, d.Auth, "the default header")
	d, err = builtinagent.DepsFromEnv(t.Context(), env(builtinagent.EnvAuthSecret, tokenARN, builtinagent.EnvAuthHeader, "X-Api-Key"), secrets)
	require.NoError(t, err)
	require.Equal(t, "X-Api-Key", d.Auth.Header)
	require.NotContains(t, fmt.Sprint(*d.Auth, d.Auth), "t0ken", "printing the auth hides its value")

	for name, getenv := range map[string]config.Getenv{
		"a header without a secret": env(builtinagent.EnvAuthHeader, "X-Api-Key"),
		"a secret that cannot be read": env(builtinagent.EnvAuthSecret,
			"arn:aws:secretsmanager:eu-west-1:111122223333:secret:other-XyZ"),
		"not a header name":  env(builtinagent.EnvAuthSecret, tokenARN, builtinagent.EnvAuthHeader, "X Api Key"),
		"the agent's header": env(builtinagent.EnvAuthSecret, tokenARN, builtinagent.EnvAuthHeader, "idempotency-key"),
	} {
		_, err := builtinagent.DepsFromEnv(t.Context(), getenv, secrets)
		require.Error(t, err, name)
		require.NotContains(t, err.Error(), "t0ken", name)
	}
	_, err = builtinagent.DepsFromEnv(t.Context(), env(builtinagent.EnvAuthSecret, tokenARN), nil)
	require.Error(t, err, "a secret but no reader")
}

// The auth header goes with every call, beside the agent's own headers;
// a value that cannot be a header stops the start.
func TestAuthHeaderOnEveryCall(t *testing.T) {
	t.Parallel()
	c := &recordingClient{}
	a, err := builtinagent.Agent(refCfg, builtinagent.Deps{Client: c, BaseURL: "https://payments.example",
		Auth: &builtinagent.Auth{Header: "X-Api-Key", Value: "k-123"}})
	require.NoError(t, err)
	for _, req := range []agent.Request{
		{OrderID: "o-1", Workflow: "payment", Step: "charge", IdempotencyKey: "o-1:0", Action: "POST /payments"},
		{OrderID: "o-1", Workflow: "payment", Step: "charge", IdempotencyKey: "o-1:0:undo", Action: "POST /refunds", Undo: true},
		{OrderID: "o-2", Step: "charge", IdempotencyKey: "o-2:0"}, // an older scheduler's: no action
	} {
		out := a.Run(t.Context(), req)
		require.Equal(t, agent.StatusDone, out.Status, "%+v: %v", req, out.Err)
	}
	calls := c.taken()
	require.Len(t, calls, 3)
	for _, call := range calls {
		require.Equal(t, "k-123", call.Header.Get("X-Api-Key"))
		require.Equal(t, "application/json", call.Header.Get("Content-Type"), "the agent's own headers stay")
	}

	_, err = builtinagent.Agent(refCfg, builtinagent.Deps{Client: c, BaseURL: "https://payments.example",
		Auth: &builtinagent.Auth{Header: "Authorization", Value: "Bearer x\r\nX-Evil: 1"}})
	require.ErrorIs(t, err, sas.ErrInvalid, "a value with a line break would smuggle a header")
	require.NotContains(t, err.Error(), "X-Evil")
}

// A request whose action is not what its workflow defines for that step of
// this agent is a permanent failure with a reason that says so, and nothing
// is called; what the workflows define is called.
func TestOnlyTheWorkflowsActionsAreCalled(t *testing.T) {
	t.Parallel()
	c := &recordingClient{}
	a, err := builtinagent.Agent(refCfg, builtinagent.Deps{Client: c, BaseURL: "https://payments.example"})
	require.NoError(t, err)

	for _, tc := range []struct {
		name   string
		req    agent.Request
		reason string
	}{
		{"a path of the attacker's", agent.Request{Workflow: "payment", Step: "charge", Action: "POST /payouts"},
			`action "POST /payouts" is not what workflow "payment" defines for step "charge" ("POST /payments")`},
		{"another step's action", agent.Request{Workflow: "order", Step: "charge", Action: "POST /shipments"},
			`action "POST /shipments" is not what workflow "order" defines for step "charge" ("POST /payments")`},
		{"the undo as the step", agent.Request{Workflow: "payment", Step: "charge", Action: "POST /refunds"},
			`is not what workflow "payment" defines`},
		{"an undo the step does not have", agent.Request{Workflow: "order", Step: "ship", Action: "POST /shipments/cancel", Undo: true},
			`undo "POST /shipments/cancel" for step "ship": workflow "order" defines no undo for it`},
		{"a step of another workflow", agent.Request{Workflow: "payment", Step: "ship", Action: "POST /shipments"},
			`workflow "payment" has no step "ship" for agent payments`},
		{"a workflow nobody registered", agent.Request{Workflow: "heist", Step: "charge", Action: "POST /payments"},
			`workflow "heist" has no step "charge"`},
		{"no workflow, unknown step", agent.Request{Step: "wire", Action: "POST /wires"},
			`no workflow has a step "wire" for agent payments`},
		{"no workflow, wrong action", agent.Request{Step: "charge", Action: "DELETE /payments"},
			`action "DELETE /payments" is not what the workflows define for step "charge"`},
		{"a very long forged action", agent.Request{Workflow: "payment", Step: "charge", Action: "POST /" + strings.Repeat("a", 5000)},
			`… [5006 bytes]`},
	} {
		tc.req.OrderID, tc.req.IdempotencyKey = "o-9", "o-9:0"
		out := a.Run(t.Context(), tc.req)
		require.Equal(t, agent.StatusFailed, out.Status, tc.name)
		require.Contains(t, out.Reason, `agent "payments" refused the request: `, tc.name)
		require.Contains(t, out.Reason, tc.reason, tc.name)
		require.Contains(t, out.Reason, "so nothing was called", tc.name)
		require.Less(t, len(out.Reason), 600, tc.name)
		require.Empty(t, c.taken(), "%s: nothing was called", tc.name)
	}

	for _, req := range []agent.Request{
		{Workflow: "order", Step: "reserve", Action: "POST /reservations"},
		{Workflow: "order", Step: "reserve", Action: "POST  /reservations/cancel", Undo: true}, // spacing aside
		{Workflow: "order", Step: "ship", Action: "POST /shipments"},
		{Step: "charge", Action: "POST /payments"}, // no workflow: the step's, in every workflow
	} {
		req.OrderID, req.IdempotencyKey = "o-10", "o-10:0"
		out := a.Run(t.Context(), req)
		require.Equal(t, agent.StatusDone, out.Status, "%+v: %v", req, out.Err)
		calls := c.taken()
		require.Len(t, calls, 1)
		require.Equal(t, strings.Fields(req.Action)[1], calls[0].Path)
	}
}

// The guard holds for every version (issue 29, F-5): a request naming an
// earlier version of a registered workflow, or any string as its version,
// is served only when its action is what the current definition gives the
// step; one with another action is refused, the version named in the
// reason, and nothing is called.
func TestEarlierWorkflowVersionsAreGuardedToo(t *testing.T) {
	t.Parallel()
	reg, err := registry.Load("", refCfg.StepTimeout)
	require.NoError(t, err)
	current := reg["order"].Version()
	var logs bytes.Buffer
	c := &recordingClient{}
	a, err := builtinagent.Agent(refCfg, builtinagent.Deps{Client: c, BaseURL: "https://payments.example", Registry: reg,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	require.NoError(t, err)

	for _, version := range []string{"0123456789abcdef", "anything at all", current} {
		forged := agent.Request{OrderID: "o-1", IdempotencyKey: "o-1:2", Workflow: "order", Version: version, Step: "ship", Action: "DELETE /accounts/42"}
		out := a.Run(t.Context(), forged)
		require.Equal(t, agent.StatusFailed, out.Status, version)
		require.Contains(t, out.Reason, `is not what workflow "order" defines for step "ship" ("POST /shipments")`, version)
		if version != current {
			require.Contains(t, out.Reason, "the request names version "+strconv.Quote(version), version)
		}
		require.Empty(t, c.taken(), "%s: nothing was called", version)
	}

	old := agent.Request{OrderID: "o-2", IdempotencyKey: "o-2:2", Workflow: "order", Version: "0123456789abcdef", Step: "ship", Action: "POST /shipments"}
	out := a.Run(t.Context(), old)
	require.Equal(t, agent.StatusDone, out.Status, "an earlier version whose action is unchanged is served: %v", out.Err)
	require.Len(t, c.taken(), 1)
	require.Contains(t, logs.String(), "earlier workflow version")
}

// Where the agent can read the definitions the scheduler stored, a request
// of an earlier version is checked against that version: its own action is
// served, another is refused, and a version no scheduler stored is no
// order's and is refused (issue 29, F-5).
func TestEarlierWorkflowVersionsAreCheckedAgainstTheirStoredDefinition(t *testing.T) {
	t.Parallel()
	reg, err := registry.Load("", refCfg.StepTimeout)
	require.NoError(t, err)
	earlier := reg["order"]
	earlier.Steps = slices.Clone(earlier.Steps)
	earlier.Steps[len(earlier.Steps)-1].Action = "POST /deliveries" // "ship", before a deploy changed it
	store := memstore.New(memstore.Config{})
	require.NoError(t, store.PutDefinition(t.Context(), earlier))
	c := &recordingClient{}
	a, err := builtinagent.Agent(refCfg, builtinagent.Deps{Client: c, BaseURL: "https://payments.example", Registry: reg, Definitions: store})
	require.NoError(t, err)

	ship := agent.Request{OrderID: "o-1", IdempotencyKey: "o-1:3", Workflow: "order", Version: earlier.Version(), Step: "ship", Action: "POST /deliveries"}
	out := a.Run(t.Context(), ship)
	require.Equal(t, agent.StatusDone, out.Status, "the earlier version's own action: %v", out.Err)
	require.Equal(t, "/deliveries", c.taken()[0].Path)

	for _, tc := range []struct {
		name    string
		version string
		action  string
		reason  string
	}{
		{"another action under the earlier version", earlier.Version(), "POST /shipments",
			`is not what version "` + earlier.Version() + `" of workflow "order" defines for step "ship" ("POST /deliveries")`},
		{"a version no scheduler stored", "0123456789abcdef", "POST /deliveries", `workflow "order" has no version "0123456789abcdef"`},
		{"any string as the version", "x", "DELETE /accounts/42", `workflow "order" has no version "x"`},
	} {
		req := ship
		req.Version, req.Action = tc.version, tc.action
		out := a.Run(t.Context(), req)
		require.Equal(t, agent.StatusFailed, out.Status, tc.name)
		require.Contains(t, out.Reason, tc.reason, tc.name)
		require.Empty(t, c.taken(), "%s: nothing was called", tc.name)
	}
}

// The built-in agent calls through the SDK's HTTPClient, the one adapter
// from the HTTP caller to agent.HTTPDoer, with the auth header added on
// top: the service sees the auth, the key and the JSON content type, and a
// 4xx is a permanent failure quoting the answer, as for any SDK agent.
func TestCallsGoThroughTheSDKsHTTPClient(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		if r.URL.Path == "/refunds" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"message":"no such charge"}`))
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	client, err := agent.NewHTTPClient(agent.HTTPConfig{})
	require.NoError(t, err)
	a, err := builtinagent.Agent(refCfg, builtinagent.Deps{Client: client, BaseURL: srv.URL, AllowHTTP: true,
		Auth: &builtinagent.Auth{Header: "X-Api-Key", Value: "k-123"}})
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	out := a.Run(ctx, agent.Request{OrderID: "o-1", Workflow: "payment", Step: "charge", IdempotencyKey: "o-1:0", Action: "POST /payments"})
	require.Equal(t, agent.StatusDone, out.Status, "%v", out.Err)
	require.JSONEq(t, `{"ok":true}`, string(out.Result))
	out = a.Run(ctx, agent.Request{OrderID: "o-1", Workflow: "payment", Step: "charge", IdempotencyKey: "o-1:0:undo", Action: "POST /refunds", Undo: true})
	require.Equal(t, agent.StatusFailed, out.Status, "%v", out.Err)
	require.Contains(t, out.Reason, "HTTP 400")
	require.Contains(t, out.Reason, "no such charge")

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 2, "a permanent answer is not retried")
	for i, h := range seen {
		require.Equal(t, "k-123", h.Get("X-Api-Key"), i)
		require.Equal(t, "application/json", h.Get("Content-Type"), i)
		require.NotEmpty(t, h.Get("Idempotency-Key"), i)
	}
}
