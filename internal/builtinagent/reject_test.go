package builtinagent_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/builtinagent"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/sas"
)

// SAS_AGENT_REJECT_STATUSES lists the service's answers that are business
// rejections: the agent reports them rejected; any other 4xx stays a
// permanent failure, which alerts. A status that is not a 4xx is refused
// at cold start with its reason.
func TestRejectStatusesFromTheEnvironment(t *testing.T) {
	t.Parallel()
	env := func(v string) config.Getenv {
		return func(k string) string {
			if k == builtinagent.EnvRejectStatuses {
				return v
			}
			return ""
		}
	}
	d, err := builtinagent.DepsFromEnv(context.Background(), env("402, 422"), nil)
	require.NoError(t, err)
	require.Equal(t, []int{402, 422}, d.RejectStatuses)
	for _, bad := range []string{"500", "402,x", "200"} {
		_, err := builtinagent.DepsFromEnv(context.Background(), env(bad), nil)
		require.ErrorIs(t, err, sas.ErrInvalid, bad)
		require.ErrorContains(t, err, builtinagent.EnvRejectStatuses)
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Idempotency-Key") == "o-declined:0" {
			w.WriteHeader(http.StatusPaymentRequired)
			_, _ = w.Write([]byte(`{"error":{"code":"card_declined","message":"Your card was declined."}}`))
			return
		}
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"message":"malformed amount"}`))
	}))
	t.Cleanup(srv.Close)
	client, err := agent.NewHTTPClient(agent.HTTPConfig{})
	require.NoError(t, err)
	a, err := builtinagent.Agent(config.Config{PaymentsURL: srv.URL, StepTimeout: time.Minute},
		builtinagent.Deps{Client: client, AllowHTTP: true, RejectStatuses: d.RejectStatuses})
	require.NoError(t, err)
	run := func(key string) agent.Outcome {
		return a.Run(context.Background(), agent.Request{OrderID: "o", Workflow: "payment", Step: "charge", Action: "POST /payments",
			IdempotencyKey: key, Payload: []byte(`{"amount":1}`)})
	}
	declined := run("o-declined:0")
	require.Equal(t, agent.StatusFailed, declined.Status)
	require.True(t, declined.Rejected, declined.Reason)
	require.Contains(t, declined.Reason, "Your card was declined.")
	bad := run("o-bad:0")
	require.Equal(t, agent.StatusFailed, bad.Status)
	require.False(t, bad.Rejected, "a 400 not listed is an operational failure")

	require.Error(t, agent.New("x").RejectStatuses(402).Err(), "only an HTTP agent reads statuses")
	require.Error(t, agent.HTTP("x", srv.URL, client).RejectStatuses(503).Err(), "a 5xx is transient, never a rejection")
}
