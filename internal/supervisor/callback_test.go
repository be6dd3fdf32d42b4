package supervisor

import (
	"fmt"
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

// TestAWeekLongCallbackWaitCosts: 10,000 orders wait a week at a callback
// step (a 30-day timeout) for a person or a webhook. During the week a
// sweep costs what it costs with no order at all: no step is read past
// the index's key condition, written, alerted or sent for, because nothing
// polls a callback step; its deadline sits in the index at its timeout.
// What a completion costs is the scheduler's (TestCallbackStepWaitsAndCompletesOnce:
// one GetOrder, one fenced write with the successor's claim);
// docs/cost.md prices both.
func TestAWeekLongCallbackWaitCosts(t *testing.T) {
	t.Parallel()
	const n, timeout = 10_000, 30 * 24 * time.Hour
	empty, e := newEnv(t), newEnv(t)
	for _, env := range []*env{empty, e} {
		env.cfg.Steps = map[string]sas.StepLimits{"step0": {Timeout: timeout, Outside: true}}
	}
	now := e.clock.Now()
	for i := range n {
		_, err := e.mem.Submit(t.Context(), sas.SubmitParams{
			Order: testOrder(fmt.Sprintf("o-%05d", i), 2), Now: now, PickupBy: now.Add(time.Minute),
			Claim: &sas.ClaimParams{Owner: "sched-1", CompleteBy: now.Add(timeout)},
		})
		require.NoError(t, err)
	}
	s, idle := e.supervisor(t), empty.supervisor(t)
	before := e.step(t, "o-04242", 0)

	for day := 1; day <= 7; day++ {
		e.clock.Advance(24 * time.Hour)
		empty.clock.Advance(24 * time.Hour)
		during, baseline := runOnce(t, s), runOnce(t, idle)
		require.Zero(t, during.DueFound, "day %d: nothing due", day)
		require.Equal(t, baseline.Reads, during.Reads, "day %d: a sweep reads what it reads with no order", day)
		require.Zero(t, during.GaveUp+during.Rescued+during.Waited+during.Fired+during.Errors)
	}
	require.Empty(t, e.queue.take(t), "nothing sent for a week of waits")
	require.Empty(t, e.alerts.Alerts(), "nobody paged")
	require.EqualValues(t, 0, e.store.getOrders.Load(), "no order read")
	after := e.step(t, "o-04242", 0)
	require.Equal(t, before.UpdatedAt, after.UpdatedAt, "no write to a waiting step")
	require.Len(t, after.History, len(before.History))
	require.Equal(t, sas.Processing, after.ProcessState)
}
