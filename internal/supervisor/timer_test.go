package supervisor

import (
	"fmt"
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
	due := now.Add(72 * time.Hour)
	for sweep := 0; sweep < 2; sweep++ {
		rep = runOnce(t, s)
		require.Equal(t, 1, rep.Fired)
		require.Zero(t, rep.GaveUp+rep.Rescued+rep.Waited)
		require.LessOrEqual(t, rep.Backlog, 0, "no queue depth read for a wait step")
		r := e.step(t, "o-w", 0)
		require.Equal(t, sas.Processing, r.ProcessState, "the scheduler ends it, fenced on its due time")
		require.Zero(t, r.FailureCount)
		require.Equal(t, due, sas.DueOf(r), "the due time is kept")
		require.Equal(t, e.clock.Now().Add(s.Config().PickupTimeout), r.DueAt, "the next look")
		sent := e.queue.take(t)
		require.Len(t, sent, 1)
		require.Equal(t, sas.KindRetry, sent[0].Kind)
		require.Equal(t, 1, sent[0].Retry.Attempt)
		require.Zero(t, sent[0].Delay)
		e.clock.Advance(s.Config().PickupTimeout)
		require.Zero(t, runOnce(t, s).DueFound, "not again before its next look and the scheduler's chance")
		e.clock.Advance(s.Config().PickupTimeout)
	}
}

// TestAWeekLongWaitCosts: 10,000 orders wait a week at a wait step. During
// the week a sweep costs what it costs with no order at all: the waits are
// not read, written or sent. At the due time one sweep asks the scheduler
// to end every wait: its FindDue pages (100 records a page per shard), one
// UpdateItem per wait (its next look moved on), and one retry per order
// sent ten to a SendMessageBatch. The
// scheduler's side (1 GetOrder, 1 Complete per order) is
// TestWaitStepEndsAtItsDueTimeAndNeverBefore's; docs/cost.md prices both.
func TestAWeekLongWaitCosts(t *testing.T) {
	t.Parallel()
	const n, week = 10_000, 7 * 24 * time.Hour
	empty := newEnv(t)
	e := newEnv(t)
	for _, env := range []*env{empty, e} {
		env.cfg.Steps = map[string]sas.StepLimits{"step0": {Timeout: week, Timer: true}}
		env.cfg.Budget = time.Hour // one sweep ends every wait, however slow the machine
	}
	now := e.clock.Now()
	for i := range n {
		_, err := e.mem.Submit(t.Context(), sas.SubmitParams{
			Order: testOrder(fmt.Sprintf("o-%05d", i), 2), Now: now, PickupBy: now.Add(time.Minute),
			Claim: &sas.ClaimParams{Owner: "sched-1", CompleteBy: now.Add(week)},
		})
		require.NoError(t, err)
	}
	s, idle := e.supervisor(t), empty.supervisor(t)

	e.clock.Advance(week - time.Minute)
	empty.clock.Advance(week - time.Minute)
	during, baseline := runOnce(t, s), runOnce(t, idle)
	require.Zero(t, during.DueFound)
	require.Equal(t, baseline.Reads, during.Reads, "a sweep during the week reads what it reads with no order")
	require.Empty(t, e.queue.take(t))

	e.clock.Advance(time.Minute)
	rep := runOnce(t, s)
	require.Equal(t, n, rep.Fired)
	require.Zero(t, rep.GaveUp+rep.Rescued+rep.Waited+rep.Errors)
	r := e.step(t, "o-04242", 0)
	require.Equal(t, sas.Processing, r.ProcessState, "the scheduler's end of each wait is the fenced write")
	require.Equal(t, now.Add(week), sas.DueOf(r))
	require.EqualValues(t, 0, e.store.getOrders.Load(), "the deployed limits: no order read")
	require.Len(t, e.queue.take(t), n, "one retry per wait")
	calls := e.queue.sendCalls()
	require.Len(t, calls, n/100, "one Send per page of 100 (SQS: ten SendMessageBatch of ten): %v", calls[:3])
	for _, c := range calls {
		require.Equal(t, 100, c)
	}
	t.Logf("the due sweep over %d waits: %d FindDue requests (%d pages), %d items read, %d UpdateItem, %d SendMessageBatch", n, rep.Reads.Requests, rep.Pages, rep.Reads.ItemsRead, n, n/10)
	// The sweep's paging (the oldest 100 of each page of up to 100 per
	// shard, 8 shards) reads a due record more than once: deterministic.
	require.Equal(t, 104, rep.Pages)
	require.Equal(t, 832, rep.Reads.Requests, "FindDue queries: pages × shards")
	require.Equal(t, 45_008, rep.Reads.ItemsRead, "index items read")
	require.Zero(t, runOnce(t, s).DueFound, "the next sweep finds none: each wait's next look moved on")
}
