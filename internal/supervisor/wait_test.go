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

// TestAnUnstartedStepWaitsUntilItsRequestCannotBeDelivered: a held step
// past its deadline whose agent never reported a pick-up may still be
// queued, however empty or busy the queues look. The supervisor moves its
// deadline to the request's delivery horizon in one write (no failure, no
// second request), and only past the horizon re-drives it as lost, still
// without a failure: one retry, for a request that can no longer arrive.
func TestAnUnstartedStepWaitsUntilItsRequestCannotBeDelivered(t *testing.T) {
	t.Parallel()
	e, _ := busyEnv(t, 10*time.Minute)
	e.cfg.DeliveryHorizon = 4 * time.Hour
	s := e.supervisor(t)
	e.submitQueued(t, "o-wait", 1)

	first := T0.Add(stepTimeout)
	e.clock.Set(first.Add(time.Second))
	rep := runOnce(t, s)
	require.Equal(t, 1, rep.Waited)
	require.Zero(t, rep.Rescued)
	require.Zero(t, rep.Backlog, "the queues are empty, and the step still waits: no depth decides")
	require.Empty(t, e.queue.take(t), "a wait sends nothing: the request in the queue is the step's one live request")
	r := e.step(t, "o-wait", 0)
	require.Equal(t, sas.Processing, r.ProcessState)
	require.Equal(t, "sched-1", r.LockedBy, "same holder")
	require.Equal(t, 1, r.Attempt, "same attempt: its pick-up report and reply are still accepted")
	require.Zero(t, r.FailureCount, "waiting is not a failure")
	require.Equal(t, first.Add(4*time.Hour), r.DueAt, "one write, to the delivery horizon")
	require.Equal(t, first, r.WaitingSince)
	require.Len(t, r.History, 3, "submitted+claimed, and one entry for the wait")

	// Nothing is due before the horizon: the sweeps do nothing.
	e.clock.Set(first.Add(4*time.Hour - time.Second))
	rep = runOnce(t, s)
	require.Zero(t, rep.Waited+rep.Rescued)

	// Past the horizon the request can no longer be delivered: lost.
	e.clock.Set(first.Add(4*time.Hour + time.Second))
	rep = runOnce(t, s)
	require.Equal(t, 1, rep.Rescued)
	r = e.step(t, "o-wait", 0)
	require.Equal(t, sas.Pending, r.ProcessState)
	require.Zero(t, r.FailureCount, "a lost request is not a failure of the step")
	require.Contains(t, r.LastError, "the request was lost")
	require.True(t, r.WaitingSince.IsZero())
	sent := e.queue.take(t)
	require.Len(t, sent, 1, "one retry")
	require.Equal(t, sas.KindRetry, sent[0].Kind)
	require.Empty(t, e.alerts.Alerts())
}

// TestAReportedPickUpMakesAPassedDeadlineAFailure: once the agent reported
// the pick-up (late, after a wait), the attempt runs on the step's timeout
// from then, and a deadline that passes is a failure, counted.
func TestAReportedPickUpMakesAPassedDeadlineAFailure(t *testing.T) {
	t.Parallel()
	e, _ := busyEnv(t, 10*time.Minute)
	s := e.supervisor(t)
	e.submitQueued(t, "o-late", 1)
	e.clock.Set(T0.Add(stepTimeout + time.Second))
	require.Equal(t, 1, runOnce(t, s).Waited)

	// Picked up an hour later: the agent reports it, the deadline follows.
	e.clock.Set(T0.Add(time.Hour))
	got := e.start(t, key("o-late", 0), sas.Processing, "sched-1", 1)
	require.Equal(t, T0.Add(time.Hour+stepTimeout), got.DueAt)
	require.Equal(t, T0.Add(time.Hour), got.StartedAt)
	e.clock.Set(got.DueAt.Add(time.Second))
	rep := runOnce(t, s)
	require.Equal(t, 1, rep.Rescued)
	require.Zero(t, rep.Waited)
	r := e.step(t, "o-late", 0)
	require.Equal(t, 1, r.FailureCount, "a started attempt that overran failed")
	require.True(t, r.StartedAt.IsZero(), "the rescue ends the lease and its pick-up")
}

// TestTheQueueDepthIsReadOncePerRunAndOnlyWhenNeeded: the depth is read for
// the report only: a run with nothing held and due reads none; a run with
// many reads it once, and waits whatever it says.
func TestTheQueueDepthIsReadOncePerRunAndOnlyWhenNeeded(t *testing.T) {
	t.Parallel()
	e, agentURL := busyEnv(t, 10*time.Minute)
	s := e.supervisor(t)
	for _, id := range []string{"o-a", "o-b", "o-c"} {
		e.submitQueued(t, id, 1)
	}
	e.backlog(t, agentURL, 1)
	runOnce(t, s)
	require.Zero(t, e.queue.depthReads, "nothing due: no read")

	e.clock.Set(T0.Add(stepTimeout + time.Second))
	rep := runOnce(t, s)
	require.Equal(t, 3, rep.Waited)
	require.Equal(t, 1, rep.Backlog)
	require.Equal(t, 2, e.queue.depthReads, "one read per watched queue for the run, not one per step")
}

// TestAFailedDepthReadChangesNoDecision: a depth that cannot be read is an
// error of the run's report, and the unstarted step waits all the same.
func TestAFailedDepthReadChangesNoDecision(t *testing.T) {
	t.Parallel()
	e, agentURL := busyEnv(t, 10*time.Minute)
	s := e.supervisor(t)
	e.submitQueued(t, "o-blind", 1)
	e.backlog(t, agentURL, 5)
	e.queue.depthFault = errors.New("throttled")
	e.clock.Set(T0.Add(stepTimeout + time.Second))
	rep, err := s.RunOnce(t.Context())
	require.ErrorContains(t, err, "throttled")
	require.Equal(t, 1, rep.Errors)
	require.Equal(t, 1, rep.Waited)
	require.Zero(t, rep.Rescued)
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
