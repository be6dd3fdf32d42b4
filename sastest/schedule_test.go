package sastest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/sastest"
)

// A schedule fired by the kit: its run is an order of the schedule's
// workflow under "<schedule>-<time>"; a second fire of the same time is the
// same run; under "skip", a run while the previous one is in flight is
// skipped, and once that one settles the next run starts.
func TestFireSchedule(t *testing.T) {
	t.Parallel()
	env := sastest.NewWith(t, sastest.Options{Schedules: []sastest.Schedule{
		{Name: "nightly", Workflow: "trip", Payload: map[string]any{"traveller": "cron"}, Overlap: "skip"},
	}}, trip, agents()...)
	at := time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC)

	first := env.FireSchedule("nightly", at)
	require.Equal(t, sastest.Fired{OrderID: "nightly-2026-11-28T02:00:00Z", Started: true}, first)
	require.Equal(t, first, env.FireSchedule("nightly", at), "a redelivered trigger is the same run")

	next := env.FireSchedule("nightly", at.Add(24*time.Hour))
	require.Equal(t, sastest.Fired{OrderID: "nightly-2026-11-29T02:00:00Z", Skipped: true}, next, "the first run is in flight")

	res := env.Settle(first.OrderID)
	require.Equal(t, sastest.StatusProcessed, res.Status)
	// The redelivered trigger re-sent the first step's live request, as a
	// redelivered intake does (docs/protocol.md): the same attempt, under
	// its idempotency key, never a second run.
	for _, c := range calls(res) {
		require.Contains(t, []string{"flight#1", "hotel#1", "pay#1"}, c)
	}

	third := env.FireSchedule("nightly", at.Add(48*time.Hour))
	require.True(t, third.Started)
	require.Equal(t, sastest.StatusProcessed, env.Settle(third.OrderID).Status)
}

// Under "allow" every run starts, whatever is in flight.
func TestFireScheduleAllow(t *testing.T) {
	t.Parallel()
	env := sastest.NewWith(t, sastest.Options{Schedules: []sastest.Schedule{{Name: "hourly", Workflow: "trip"}}}, trip, agents()...)
	at := time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC)
	a, b := env.FireSchedule("hourly", at), env.FireSchedule("hourly", at.Add(time.Hour))
	require.True(t, a.Started)
	require.True(t, b.Started)
	require.Equal(t, sastest.StatusProcessed, env.Settle(a.OrderID).Status)
	require.Equal(t, sastest.StatusProcessed, env.Settle(b.OrderID).Status)
}
