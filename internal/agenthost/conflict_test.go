package agenthost_test

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// A 409 without Retry-After is a genuine conflict, not a key in progress:
// the agent reports it at once, quoting the service, instead of waiting it
// out until the supervisor gives up and undoes a step that never took effect.
func TestBareConflictIsAPermanentFailure(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	r := newRig(t, rigOptions{remote: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"error":{"type":"account_frozen","message":"the account is frozen"}}`))
	})})

	resp := r.handle(event(request("order-409")))
	require.Empty(t, resp.BatchItemFailures)
	reps := r.replies()
	require.Len(t, reps, 1)
	require.Equal(t, sas.OutcomeFailed, reps[0].Outcome)
	require.Contains(t, reps[0].Reason, "HTTP 409")
	require.Contains(t, reps[0].Reason, "the account is frozen")
	require.EqualValues(t, 1, calls.Load(), "a genuine conflict is not asked again")
}

// A 409 with Retry-After says the key is in progress: it is waited out
// (by the caller's own tries, then the runner's), and the stored answer wins.
func TestConflictInProgressIsWaitedOut(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	const busyFor = 7 // more than the caller's own tries (5), so the runner's wait is exercised too
	r := newRig(t, rigOptions{remote: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1) <= busyFor {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"error":{"type":"idempotency_key_in_use","message":"still being processed"}}`))
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"pay_1","status":"captured"}`))
	})})

	resp := r.handle(event(request("order-409b")))
	require.Empty(t, resp.BatchItemFailures)
	reps := r.replies()
	require.Len(t, reps, 1)
	require.Equal(t, sas.OutcomeDone, reps[0].Outcome, reps[0].Reason)
	require.EqualValues(t, busyFor+1, calls.Load())
}
