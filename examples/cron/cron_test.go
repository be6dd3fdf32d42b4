package cron_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/examples/cron"
	"github.com/sas-go/sas/sastest"
)

// ledger is an in-memory bookkeeping service: it records each
// reconciliation once per key, as the real one must.
type ledger struct {
	mu         sync.Mutex
	reconciled map[string]int // key → entries
}

func (l *ledger) Entries(context.Context, string) (int, error) { return 42, nil }

func (l *ledger) Reconcile(_ context.Context, key, _ string, entries int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reconciled[key] = entries
	return nil
}

func newEnv(t *testing.T) (*sastest.Env, *ledger) {
	l := &ledger{reconciled: map[string]int{}}
	var payload map[string]any
	require.NoError(t, json.Unmarshal(cron.Payload, &payload))
	env := sastest.NewWith(t, sastest.Options{Schedules: []sastest.Schedule{
		{Name: cron.ScheduleName, Workflow: "reconcile", Payload: payload, Overlap: "skip"},
	}}, cron.Workflows(), cron.Agent(l))
	return env, l
}

// nights is 02:00 in Paris on the night n of December 2026 (01:00 UTC).
func night(n int) time.Time { return time.Date(2026, 12, n, 1, 0, 0, 0, time.UTC) }

// Each night's run reconciles the ledger once, under its own order id; a
// trigger delivered twice is the same run.
func TestEachNightReconcilesOnce(t *testing.T) {
	t.Parallel()
	env, l := newEnv(t)
	for n := 1; n <= 3; n++ {
		run := env.FireSchedule(cron.ScheduleName, night(n))
		require.True(t, run.Started)
		require.Equal(t, run, env.FireSchedule(cron.ScheduleName, night(n)), "EventBridge Scheduler's retry: the same run")
		res := env.Settle(run.OrderID)
		require.Equal(t, sastest.StatusProcessed, res.Status)
	}
	require.Equal(t, map[string]int{
		"nightly-recon-2026-12-01T01:00:00Z:1": 42,
		"nightly-recon-2026-12-02T01:00:00Z:1": 42,
		"nightly-recon-2026-12-03T01:00:00Z:1": 42,
	}, l.reconciled)
}

// A run that falls due while last night's is still in flight is skipped,
// not run beside it; the night after, the schedule runs again.
func TestANightStillRunningSkipsTheNext(t *testing.T) {
	t.Parallel()
	env, l := newEnv(t)
	first := env.FireSchedule(cron.ScheduleName, night(1))
	require.True(t, first.Started)
	second := env.FireSchedule(cron.ScheduleName, night(2))
	require.Equal(t, sastest.Fired{OrderID: "nightly-recon-2026-12-02T01:00:00Z", Skipped: true}, second)
	require.Equal(t, sastest.StatusProcessed, env.Settle(first.OrderID).Status)

	third := env.FireSchedule(cron.ScheduleName, night(3))
	require.True(t, third.Started)
	require.Equal(t, sastest.StatusProcessed, env.Settle(third.OrderID).Status)
	require.Len(t, l.reconciled, 2, "the skipped night reconciled nothing")
}
