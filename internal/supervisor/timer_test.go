package supervisor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// TestAWaitStepIsEndedAtItsDueTimeNeverFailed: a wait step's due time is
// its lease's deadline in the index; before it a sweep does nothing; at it
// the supervisor asks the scheduler to end the wait (a retry of its
// attempt, undelayed), counts no failure, gives nothing up, writes nothing
// and reads no queue depth, whatever the queues hold. Until the scheduler
// ends it, each sweep asks again.
func TestAWaitStepIsEndedAtItsDueTimeNeverFailed(t *testing.T) {
	t.Parallel()
	e, agentURL := busyEnv(t, 10*time.Minute)
	e.cfg.Steps["step0"] = sas.StepLimits{Timeout: 72 * time.Hour, Timer: true}
	s := e.supervisor(t)
	now := e.clock.Now()
	_, err := e.mem.Submit(t.Context(), sas.SubmitParams{
		Order: testOrder("o-w", 2), Now: now, PickupBy: now.Add(time.Minute),
		Claim: &sas.ClaimParams{Owner: "sched-1", CompleteBy: now.Add(72 * time.Hour)},
	})
	require.NoError(t, err)
	e.backlog(t, agentURL, 40) // busy queues are no reason to wait longer

	e.clock.Advance(72*time.Hour - time.Second)
	rep := runOnce(t, s)
	require.Zero(t, rep.DueFound, "not due before its due time")

	e.clock.Advance(time.Second)
	for sweep := 0; sweep < 2; sweep++ {
		rep = runOnce(t, s)
		require.Equal(t, 1, rep.Fired)
		require.Zero(t, rep.GaveUp+rep.Rescued+rep.Waited)
		require.LessOrEqual(t, rep.Backlog, 0, "no queue depth read for a wait step")
		r := e.step(t, "o-w", 0)
		require.Equal(t, sas.Processing, r.ProcessState, "the scheduler ends it, fenced on its due time")
		require.Zero(t, r.FailureCount)
		sent := e.queue.take(t)
		require.Len(t, sent, 1)
		require.Equal(t, sas.KindRetry, sent[0].Kind)
		require.Equal(t, 1, sent[0].Retry.Attempt)
		require.Zero(t, sent[0].Delay)
		e.clock.Advance(time.Minute)
	}
}
