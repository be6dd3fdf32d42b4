package supervisor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// TestACallbackStepIsGivenUpAtItsTimeout: a callback step waits with its
// deadline in the index and nothing polls it; before the deadline a sweep
// does nothing to it; at the deadline the supervisor gives it up at once
// (its first failure, whatever the queues hold: a re-drive would hand out a
// new token), alerts, and asks for the order's compensation.
func TestACallbackStepIsGivenUpAtItsTimeout(t *testing.T) {
	t.Parallel()
	e, agentURL := busyEnv(t, 10*time.Minute)
	e.cfg.Steps["step0"] = sas.StepLimits{Timeout: 72 * time.Hour, Outside: true}
	s := e.supervisor(t)
	now := e.clock.Now()
	_, err := e.mem.Submit(t.Context(), sas.SubmitParams{
		Order: testOrder("o-cb", 2), Now: now, PickupBy: now.Add(time.Minute),
		Claim: &sas.ClaimParams{Owner: "sched-1", CompleteBy: now.Add(72 * time.Hour)},
	})
	require.NoError(t, err)
	e.backlog(t, agentURL, 40) // busy queues do not make a callback wait longer

	e.clock.Advance(72*time.Hour - time.Second)
	rep := runOnce(t, s)
	require.Zero(t, rep.DueFound, "not due before its timeout")
	require.Equal(t, sas.Processing, e.step(t, "o-cb", 0).ProcessState)

	e.clock.Advance(time.Second)
	rep = runOnce(t, s)
	require.Equal(t, 1, rep.GaveUp)
	require.Zero(t, rep.Rescued)
	require.Zero(t, rep.Waited)
	r := e.step(t, "o-cb", 0)
	require.Equal(t, sas.Error, r.ProcessState)
	require.Equal(t, 1, r.FailureCount)
	require.Contains(t, r.LastError, "no completion or heartbeat")
	require.Len(t, e.alerts.Alerts(), 1)
	sent := e.queue.take(t)
	require.Len(t, sent, 1)
	require.Equal(t, sas.KindCompensate, sent[0].Kind)
}
