package supervisor

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// busyEnv is an env whose supervisor watches an agent queue and the
// scheduler queue (Config.BacklogQueueURLs), with step0's limits known.
func busyEnv(t *testing.T, waitLimit time.Duration) (*env, string) {
	t.Helper()
	e := newEnv(t)
	created, err := e.mq.CreateQueue(t.Context(), sas.CreateQueueParams{Name: "agent"})
	require.NoError(t, err)
	e.cfg.BacklogQueueURLs = []string{created.URL, e.url}
	e.cfg.WaitLimit = waitLimit
	e.cfg.Steps = map[string]sas.StepLimits{"step0": {Timeout: stepTimeout}, "step1": {Timeout: stepTimeout}}
	return e, created.URL
}

// backlog puts n agent requests of other orders in the agent queue.
func (e *env) backlog(t *testing.T, url string, n int) {
	t.Helper()
	for range n {
		_, err := e.mq.Send(t.Context(), sas.SendParams{QueueURL: url, Messages: []sas.OutboundMessage{{ID: "1", Body: `{"kind":"agent.request"}`}}})
		require.NoError(t, err)
	}
}

// drain receives and deletes everything in a queue.
func (e *env) drain(t *testing.T, url string) {
	t.Helper()
	for {
		msgs, err := e.mq.Receive(t.Context(), sas.ReceiveParams{QueueURL: url, Max: 10, Visibility: time.Minute})
		require.NoError(t, err)
		if len(msgs) == 0 {
			return
		}
		for _, m := range msgs {
			_, err := e.mq.Delete(t.Context(), sas.DeleteParams{QueueURL: url, Receipts: []string{m.Receipt}})
			require.NoError(t, err)
		}
	}
}

// TestAPassedDeadlineInABusyQueueIsNotAFailure: while the agent queue
// holds requests, a held step past its deadline may never have started.
// The supervisor extends its lease (no failure, no second request), again
// and again, until the queues are empty (then it is a failure as before).
func TestAPassedDeadlineInABusyQueueIsNotAFailure(t *testing.T) {
	t.Parallel()
	e, agentURL := busyEnv(t, 10*time.Minute)
	s := e.supervisor(t)
	e.submitClaimed(t, "o-wait", 1)
	e.backlog(t, agentURL, 40)

	first := T0.Add(stepTimeout)
	for i := 1; i <= 5; i++ {
		e.clock.Set(e.step(t, "o-wait", 0).DueAt.Add(time.Second))
		rep := runOnce(t, s)
		require.Equal(t, 1, rep.Waited, "round %d", i)
		require.Equal(t, 40, rep.Backlog)
		require.Zero(t, rep.Rescued)
		require.Empty(t, e.queue.take(t), "a wait sends nothing: the request in the queue is the step's one live request")
		r := e.step(t, "o-wait", 0)
		require.Equal(t, sas.Processing, r.ProcessState)
		require.Equal(t, "sched-1", r.LockedBy, "same holder")
		require.Equal(t, 1, r.Attempt, "same attempt: its reply is still accepted")
		require.Zero(t, r.FailureCount, "waiting is not a failure")
		require.Equal(t, e.clock.Now().Add(stepTimeout), r.DueAt, "extended by one step timeout")
		require.Equal(t, first, r.WaitingSince)
		require.Len(t, r.History, 3, "submitted+claimed, and one entry for the first wait only")
	}
	require.Empty(t, e.alerts.Alerts())

	// The queues are empty: the request is nowhere, the attempt failed.
	e.drain(t, agentURL)
	e.clock.Set(e.step(t, "o-wait", 0).DueAt.Add(time.Second))
	rep := runOnce(t, s)
	require.Equal(t, 1, rep.Rescued)
	require.Zero(t, rep.Waited)
	r := e.step(t, "o-wait", 0)
	require.Equal(t, sas.Pending, r.ProcessState)
	require.Equal(t, 1, r.FailureCount)
	require.True(t, r.WaitingSince.IsZero())
	sent := e.queue.take(t)
	require.Len(t, sent, 1, "one retry")
	require.Equal(t, sas.KindRetry, sent[0].Kind)
}

// TestWaitingIsBoundedByTheWaitLimit: a request that waits longer than its
// step's wait limit beyond the first deadline that passed is a failure, even
// with the queues busy. Over the whole wait the supervisor sends nothing, and
// then exactly one retry: a rescue never adds a request to a busy backlog
// before the limit.
func TestWaitingIsBoundedByTheWaitLimit(t *testing.T) {
	t.Parallel()
	e, agentURL := busyEnv(t, 2*time.Minute)
	s := e.supervisor(t)
	e.submitClaimed(t, "o-limit", 1)
	e.backlog(t, agentURL, 3)

	waits := 0
	for {
		e.clock.Set(e.step(t, "o-limit", 0).DueAt.Add(time.Second))
		rep := runOnce(t, s)
		if rep.Waited == 0 {
			require.Equal(t, 1, rep.Rescued)
			break
		}
		waits++
		require.Empty(t, e.queue.take(t))
		require.LessOrEqual(t, waits, 4, "2 minutes of waiting at 31 s a round: at most 4 waits")
	}
	require.Equal(t, 4, waits)
	r := e.step(t, "o-limit", 0)
	require.Equal(t, 1, r.FailureCount)
	require.Contains(t, r.LastError, "in busy queues, its wait limit")
	require.Len(t, e.queue.take(t), 1)
}

// TestTheQueueDepthIsReadOncePerRunAndOnlyWhenNeeded: a run with nothing
// held and due reads no depth; a run with many reads it once.
func TestTheQueueDepthIsReadOncePerRunAndOnlyWhenNeeded(t *testing.T) {
	t.Parallel()
	e, agentURL := busyEnv(t, 10*time.Minute)
	s := e.supervisor(t)
	for _, id := range []string{"o-a", "o-b", "o-c"} {
		e.submitClaimed(t, id, 1)
	}
	e.backlog(t, agentURL, 1)
	runOnce(t, s)
	require.Zero(t, e.queue.depthReads, "nothing due: no read")

	e.clock.Set(T0.Add(stepTimeout + time.Second))
	rep := runOnce(t, s)
	require.Equal(t, 3, rep.Waited)
	require.Equal(t, 2, e.queue.depthReads, "one read per watched queue for the run, not one per step")
}

// TestAFailedDepthReadFallsBackToRescue: when the depth cannot be read the
// run reports the error and treats a passed deadline as before.
func TestAFailedDepthReadFallsBackToRescue(t *testing.T) {
	t.Parallel()
	e, agentURL := busyEnv(t, 10*time.Minute)
	s := e.supervisor(t)
	e.submitClaimed(t, "o-blind", 1)
	e.backlog(t, agentURL, 5)
	e.queue.depthFault = errors.New("throttled")
	e.clock.Set(T0.Add(stepTimeout + time.Second))
	rep, err := s.RunOnce(t.Context())
	require.ErrorContains(t, err, "throttled")
	require.Equal(t, 1, rep.Errors)
	require.Equal(t, 1, rep.Rescued)
	require.Zero(t, rep.Waited)
}

// TestBacklogQueuesNeedADepthReader: a queue that cannot read its depth is
// a configuration error, named.
func TestBacklogQueuesNeedADepthReader(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.cfg
	cfg.Queue = struct{ sas.Queue }{e.mq}
	cfg.BacklogQueueURLs = []string{e.url}
	_, err := New(cfg)
	require.ErrorContains(t, err, "cannot read a queue's depth")
}
