package supervisor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/memqueue"
	"github.com/sas-go/sas/internal/sas"
)

func TestNewSetsAndChecksDefaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.supervisor(t, func(c *Config) { c.Clock, c.Logger, c.Metrics, c.Actor = nil, nil, nil, "" })
	cfg := s.Config()
	require.Equal(t, 3, cfg.MaxFailures)
	require.Equal(t, time.Minute, cfg.PickupTimeout)
	require.Equal(t, 5*time.Second, cfg.BaseBackoff)
	require.Equal(t, 15*time.Minute, cfg.MaxBackoff)
	require.Equal(t, 100, cfg.PageSize)
	require.Equal(t, 20*time.Second, cfg.Budget)
	require.Equal(t, "supervisor", cfg.Actor)
	require.NotNil(t, cfg.Clock)
	require.NotNil(t, cfg.Logger)
	require.NotNil(t, cfg.Metrics)

	bad := []struct {
		field string
		tweak func(*Config)
	}{
		{"Store", func(c *Config) { c.Store = nil }},
		{"Queue", func(c *Config) { c.Queue = nil }},
		{"Alerter", func(c *Config) { c.Alerter = nil }},
		{"ControlQueueURL", func(c *Config) { c.ControlQueueURL = "" }},
		{"MaxFailures", func(c *Config) { c.MaxFailures = -1 }},
		{"PickupTimeout", func(c *Config) { c.PickupTimeout = time.Millisecond }},
		{"MaxBackoff", func(c *Config) { c.MaxBackoff = 16 * time.Minute }},
		{"BaseBackoff", func(c *Config) { c.BaseBackoff = 2 * time.Minute; c.MaxBackoff = time.Minute }},
		{"BaseBackoff", func(c *Config) { c.BaseBackoff = 1500 * time.Millisecond }},
		{"PageSize", func(c *Config) { c.PageSize = 5000 }},
		{"Budget", func(c *Config) { c.Budget = -time.Second }},
	}
	for _, b := range bad {
		cfg := e.cfg
		b.tweak(&cfg)
		_, err := New(cfg)
		require.ErrorIs(t, err, sas.ErrInvalid, b.field)
		require.ErrorContains(t, err, b.field)
	}
	// Every problem is named at once.
	_, err := New(Config{})
	for _, f := range []string{"Store", "Queue", "Alerter", "ControlQueueURL"} {
		require.ErrorContains(t, err, f)
	}
}

func TestExpiredProcessingIsHandedBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.supervisor(t)
	e.submitClaimed(t, "o-1", 2)
	e.clock.Set(T0.Add(stepTimeout - time.Millisecond))
	rep := runOnce(t, s)
	require.Zero(t, rep.DueFound, "not expired yet")
	require.Empty(t, e.queue.take(t))

	now := T0.Add(stepTimeout + time.Second)
	e.clock.Set(now)
	rep = runOnce(t, s)
	require.Equal(t, 1, rep.DueFound)
	require.Equal(t, 1, rep.Rescued)
	require.Zero(t, rep.NothingRan, "its attempt ran (claimed, never answered)")
	require.Equal(t, StateCounts{Due: 1, Rescued: 1}, rep.ByState[sas.Processing])
	require.Equal(t, StopDrained, rep.Stopped)

	r := e.step(t, "o-1", 0)
	require.Equal(t, sas.Pending, r.ProcessState)
	require.Empty(t, r.LockedBy)
	require.True(t, r.CompleteBy.IsZero())
	require.Equal(t, 1, r.FailureCount)
	require.Equal(t, 1, r.Attempt)
	delay := jittered(1, key("o-1", 0), 1)
	require.Equal(t, now.Add(delay+time.Minute), r.DueAt, "pick-up deadline = now + delay + PickupTimeout")
	last := r.History[len(r.History)-1]
	require.Equal(t, "sup-test", last.Actor)
	require.Contains(t, last.Reason, "attempt 1 not finished by its deadline")
	require.Equal(t, sas.Pending, e.step(t, "o-1", 1).ProcessState, "the next step is untouched")

	msgs := e.queue.take(t)
	require.Len(t, msgs, 1)
	require.Equal(t, sas.KindRetry, msgs[0].Kind)
	require.Equal(t, delay, msgs[0].Delay)
	require.Equal(t, sas.Retry{V: 1, Kind: sas.KindRetry, OrderID: "o-1", Step: 0, Attempt: 1, Reason: last.Reason}, msgs[0].Retry)
	stats, err := e.mq.Stats(e.url)
	require.NoError(t, err)
	require.Equal(t, memqueue.Stats{Delayed: 1}, stats, "the retry waits out its backoff in the queue")

	// The scheduler acts on the retry: a claim fenced on the attempt it names.
	e.clock.Advance(delay)
	got := e.claim(t, key("o-1", 0), "", msgs[0].Retry.Attempt)
	require.Equal(t, 2, got.Attempt)
	require.Empty(t, e.alerts.Alerts())
}

func TestStrandedPendingIsRedriven(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.supervisor(t)
	e.submitUnclaimed(t, "o-strand", 1) // the intake was written, the dispatch lost
	e.clock.Set(T0.Add(59 * time.Second))
	require.Zero(t, runOnce(t, s).DueFound)

	// A step never claimed nor failed is first asked for, as an order
	// that starts later is at its start time: a retry, nothing counted;
	// its deadline within SQS's delay of its write, a pick-up timeout
	// after it (the scheduler's own delayed retry goes first).
	e.clock.Set(T0.Add(time.Minute))
	require.Zero(t, runOnce(t, s).DueFound)
	e.clock.Set(T0.Add(time.Minute + s.Config().PickupTimeout))
	rep := runOnce(t, s)
	require.Equal(t, 1, rep.Fired)
	require.Zero(t, e.step(t, "o-strand", 0).FailureCount)
	fired := e.queue.take(t)
	require.Len(t, fired, 1)
	require.Equal(t, 0, fired[0].Retry.Attempt)

	// That retry lost too: a pick-up timeout later it is sent again, still
	// no failure (nothing ran), after as long as it has waited unclaimed
	// (docs/protocol.md, "A step never claimed has not failed").
	e.clock.Set(T0.Add(time.Minute + 2*s.Config().PickupTimeout))
	rep = runOnce(t, s)
	require.Equal(t, StateCounts{Due: 1, Rescued: 1}, rep.ByState[sas.Pending])
	require.Equal(t, 1, rep.NothingRan, "a re-drive of a step none of whose attempts ran")
	r := e.step(t, "o-strand", 0)
	require.Equal(t, sas.Pending, r.ProcessState)
	require.Zero(t, r.FailureCount)
	require.Contains(t, r.LastError, "not claimed by its pick-up deadline")
	require.Contains(t, r.LastError, "not a failure")
	require.Equal(t, T0.Add(time.Minute), r.WaitingSince, "unclaimed since its first pick-up deadline")
	msgs := e.queue.take(t)
	require.Len(t, msgs, 1)
	require.Equal(t, sas.Retry{V: 1, Kind: sas.KindRetry, OrderID: "o-strand", Step: 0, Attempt: 0, Reason: r.LastError}, msgs[0].Retry)
	require.Equal(t, 2*s.Config().PickupTimeout, msgs[0].Delay, "sent again after as long as it has waited")
	got := e.claim(t, key("o-strand", 0), "", 0)
	require.Zero(t, got.WaitingSince, "a claim ends the wait")
}

func TestThresholdGivesUpAlertsAndCompensates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.supervisor(t)
	e.submitClaimed(t, "o-t", 2)

	// Failure 1: the agent never answers attempt 1.
	e.clock.Set(T0.Add(stepTimeout))
	require.Equal(t, 1, runOnce(t, s).Rescued)
	msgs := e.queue.take(t)
	require.Equal(t, jittered(1, key("o-t", 0), 1), msgs[0].Delay)

	// Failure 2: attempt 2 is claimed and hangs too; the backoff doubles.
	e.clock.Advance(msgs[0].Delay)
	e.claim(t, key("o-t", 0), "", 1)
	e.clock.Advance(stepTimeout)
	require.Equal(t, 1, runOnce(t, s).Rescued)
	msgs = e.queue.take(t)
	require.Len(t, msgs, 1)
	require.Equal(t, jittered(2, key("o-t", 0), 2), msgs[0].Delay)
	require.Equal(t, 2, msgs[0].Retry.Attempt)

	// Failure 3: attempt 3 hangs too. At the threshold: give up.
	e.clock.Advance(msgs[0].Delay)
	e.claim(t, key("o-t", 0), "", 2)
	e.clock.Advance(stepTimeout)
	rep := runOnce(t, s)
	require.Equal(t, 1, rep.GaveUp)
	require.Zero(t, rep.Rescued)
	require.Equal(t, StateCounts{Due: 1, GaveUp: 1}, rep.ByState[sas.Processing])
	r := e.step(t, "o-t", 0)

	r = e.step(t, "o-t", 0)
	require.Equal(t, sas.Error, r.ProcessState)
	require.Equal(t, 3, r.FailureCount)
	require.Contains(t, r.LastError, "failure 3 of 3: giving up")

	al := e.alerts.Alerts()
	require.Len(t, al, 1)
	require.Equal(t, sas.Alert{
		OrderID: "o-t", Step: 0, StepName: "step0", State: sas.Error, Reason: r.LastError,
		Attempts: 3, Failures: 3, At: e.clock.Now(), Source: "supervisor", ID: "o-t/0/Error/3",
	}, al[0])
	require.Equal(t, 1, rep.Awaiting, "both went out: the compensate request waits for the compensation it asks for")
	require.Zero(t, rep.Settled)
	require.Equal(t, e.clock.Now().Add(DefaultCompensateRecheck), e.step(t, "o-t", 0).OwedAt)

	msgs = e.queue.take(t)
	require.Len(t, msgs, 1, "a compensate request, and no retry")
	require.Equal(t, sas.KindCompensate, msgs[0].Kind)
	require.Zero(t, msgs[0].Delay)
	require.Equal(t, "o-t", msgs[0].Compensate.OrderID)
	require.Equal(t, "sup-test", msgs[0].Compensate.Actor)
	require.Contains(t, msgs[0].Compensate.Reason, "step 0 (step0) gave up")

	// Given up is final for the supervisor: an operator takes over.
	e.clock.Advance(time.Hour)
	require.Zero(t, runOnce(t, s).DueFound)
}

// stuckUndo builds an order whose step 1 failed and whose step 0's undo
// was claimed and hangs.
func stuckUndo(t *testing.T, e *env, id string) {
	t.Helper()
	e.submitClaimed(t, id, 2)
	now := e.clock.Now()
	_, err := e.mem.Complete(t.Context(), sas.CompleteParams{Key: key(id, 0), Owner: "sched-1", Attempt: 1, Now: now,
		Next: &sas.ClaimParams{Key: key(id, 1), Owner: "sched-1", Now: now, CompleteBy: now.Add(stepTimeout)}})
	require.NoError(t, err)
	_, err = e.mem.Fail(t.Context(), sas.FailParams{Key: key(id, 1), Owner: "sched-1", Attempt: 1, Now: now, Reason: "card declined"})
	require.NoError(t, err)
	e.claim(t, key(id, 0), sas.Processed, 1)
}

func TestStuckUndoIsRescuedThenGivenUpWithoutCompensation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.supervisor(t)
	stuckUndo(t, e, "o-undo")

	e.clock.Advance(stepTimeout)
	rep := runOnce(t, s)
	require.Equal(t, StateCounts{Due: 1, Rescued: 1}, rep.ByState[sas.Compensating])
	r := e.step(t, "o-undo", 0)
	require.Equal(t, sas.Compensating, r.ProcessState, "an undo is handed back as an undo")
	require.Empty(t, r.LockedBy)
	require.Equal(t, 1, r.FailureCount)
	msgs := e.queue.take(t)
	require.Len(t, msgs, 1)
	require.Equal(t, sas.Retry{V: 1, Kind: sas.KindRetry, OrderID: "o-undo", Step: 0, Attempt: 2, Reason: r.LastError}, msgs[0].Retry)
	require.Equal(t, sas.Error, e.step(t, "o-undo", 1).ProcessState, "the failed step is not the supervisor's")

	require.Contains(t, r.LastError, "failure 1 of 20", "an undo's own retry policy: it rides out an outage")
	require.Equal(t, sas.DefaultUndoRetry.Interval(1, sas.JitterSeed(key("o-undo", 0), 1)), msgs[0].Delay)

	// Each undo attempt is re-claimed and hangs: failures 2 to 19, each
	// handed back after the undo policy's interval (10s doubling to 5m,
	// jittered), far past the forward policy's 3.
	for failures := 2; failures < sas.DefaultUndoMaxAttempts; failures++ {
		e.clock.Set(r.DueAt)
		e.claim(t, key("o-undo", 0), sas.Compensating, r.Attempt)
		e.clock.Advance(stepTimeout)
		runOnce(t, s)
		r = e.step(t, "o-undo", 0)
		require.Equal(t, sas.Compensating, r.ProcessState)
		require.Equal(t, failures, r.FailureCount)
		require.Contains(t, r.LastError, "not finished by its deadline")
		msgs = e.queue.take(t)
		require.Len(t, msgs, 1)
		ceiling := sas.DefaultUndoRetry.Backoff(failures)
		require.LessOrEqual(t, msgs[0].Delay, ceiling)
		require.GreaterOrEqual(t, msgs[0].Delay, ceiling/2)
		require.LessOrEqual(t, ceiling, sas.DefaultUndoMaxInterval)
	}

	e.clock.Set(r.DueAt)
	e.claim(t, key("o-undo", 0), sas.Compensating, r.Attempt)
	e.clock.Advance(stepTimeout)
	rep = runOnce(t, s)
	require.Equal(t, StateCounts{Due: 1, GaveUp: 1}, rep.ByState[sas.Compensating])
	r = e.step(t, "o-undo", 0)
	require.Equal(t, sas.CompensationFailed, r.ProcessState)
	al := e.alerts.Alerts()
	require.Len(t, al, 1)
	require.Equal(t, sas.CompensationFailed, al[0].State)
	require.Equal(t, sas.DefaultUndoMaxAttempts, al[0].Failures)
	require.Empty(t, e.queue.take(t), "nothing undoes a failed undo: no compensate message")
}

// A deployment's undo policy (Config.UndoRetry) and a step's own
// (StepLimits.Undo) replace the default; the forward policy never applies
// to an undo.
func TestUndoRetryPolicyIsTheUndos(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.supervisor(t, func(c *Config) { c.UndoRetry = sas.RetryPolicy{MaxAttempts: 2}; c.MaxFailures = 5 })
	stuckUndo(t, e, "o-undo2")
	e.clock.Advance(stepTimeout)
	runOnce(t, s)
	r := e.step(t, "o-undo2", 0)
	require.Contains(t, r.LastError, "failure 1 of 2")
	require.Equal(t, sas.RetryPolicy{MaxAttempts: 2}.Or(sas.DefaultUndoRetry).Interval(1, sas.JitterSeed(key("o-undo2", 0), 1)),
		e.queue.take(t)[0].Delay, "the fields it leaves zero are the default's")
	e.clock.Set(r.DueAt)
	e.claim(t, key("o-undo2", 0), sas.Compensating, r.Attempt)
	e.clock.Advance(stepTimeout)
	rep := runOnce(t, s)
	require.Equal(t, StateCounts{Due: 1, GaveUp: 1}, rep.ByState[sas.Compensating])
	require.Equal(t, sas.CompensationFailed, e.step(t, "o-undo2", 0).ProcessState)
}

// River's rescuer once overwrote jobs that completed between its query and
// its update (riverqueue/river#1302). Here the agent's reply lands in that
// window: the supervisor's fenced write must lose and change nothing.
func TestStepCompletedAfterFindDueIsNotOverwritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.supervisor(t)
	e.submitClaimed(t, "o-race", 1)
	e.clock.Set(T0.Add(stepTimeout + time.Second))
	var once sync.Once
	e.store.afterFindDue = func(p sas.FindDueParams, res sas.FindDueResult) {
		if p.State != sas.Processing || len(res.Records) == 0 {
			return
		}
		once.Do(func() {
			_, err := e.mem.Complete(context.Background(), sas.CompleteParams{Key: key("o-race", 0), Owner: "sched-1", Attempt: 1, Now: e.clock.Now()})
			require.NoError(t, err)
		})
	}
	rep := runOnce(t, s)
	require.Equal(t, 1, rep.DueFound)
	require.Equal(t, 1, rep.LostRaces)
	require.Zero(t, rep.Rescued)
	require.Equal(t, StateCounts{Due: 1, LostRaces: 1}, rep.ByState[sas.Processing])
	r := e.step(t, "o-race", 0)
	require.Equal(t, sas.Processed, r.ProcessState)
	require.Zero(t, r.FailureCount)
	require.Empty(t, e.queue.take(t), "no retry for a finished step")
	require.Empty(t, e.alerts.Alerts())
}

func TestRetryNotSentIsRedrivenByALaterSweep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.supervisor(t)
	e.submitClaimed(t, "o-send", 1)
	e.clock.Set(T0.Add(stepTimeout))
	e.failSends(errors.New("sqs unavailable"))

	rep, err := s.RunOnce(t.Context())
	require.ErrorContains(t, err, "sqs unavailable")
	require.ErrorContains(t, err, "sending retry for o-send/0")
	require.Equal(t, 1, rep.Rescued, "the state was written")
	require.Equal(t, 1, rep.SendFailures)
	require.Equal(t, 1, rep.Errors)
	require.Equal(t, StateCounts{Due: 1, Rescued: 1, Errors: 1}, rep.ByState[sas.Processing])
	r := e.step(t, "o-send", 0)
	require.Equal(t, sas.Pending, r.ProcessState)
	require.False(t, r.DueAt.IsZero(), "Pending with a pick-up deadline: findable")
	require.Empty(t, e.queue.take(t))

	e.failSends(nil)
	require.Zero(t, runOnce(t, s).DueFound, "not before its pick-up deadline")
	e.clock.Set(r.DueAt)
	rep = runOnce(t, s)
	require.Equal(t, StateCounts{Due: 1, Rescued: 1}, rep.ByState[sas.Pending])
	msgs := e.queue.take(t)
	require.Len(t, msgs, 1)
	require.Equal(t, sas.Retry{V: 1, Kind: sas.KindRetry, OrderID: "o-send", Step: 0, Attempt: 1, Reason: e.step(t, "o-send", 0).LastError}, msgs[0].Retry)
	require.Zero(t, msgs[0].Delay, "never claimed: sent again at once, as it has not waited yet")
	require.Equal(t, 1, e.step(t, "o-send", 0).FailureCount, "the failure of the attempt that hung, and no other")
	e.claim(t, key("o-send", 0), "", 1)
}

// A failed send or alert of a give-up is owed, not lost: owed_test.go.

func TestPagesBoundEachBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.supervisor(t, func(c *Config) { c.PageSize = 100 })
	for i := 0; i < 250; i++ {
		e.submitClaimed(t, fmt.Sprintf("o-%03d", i), 1)
	}
	e.clock.Set(T0.Add(stepTimeout))
	rep := runOnce(t, s)
	require.Equal(t, 250, rep.Rescued)
	require.Equal(t, []int{100, 100, 50}, e.queue.sendCalls(), "one batched send per page, at most PageSize")
	// One (empty) owed query; round 1 visits all three states; Pending and
	// Compensating are done. Processing takes three full or partial pages
	// and one empty one.
	require.Equal(t, 7, rep.Pages)
	require.Equal(t, StopDrained, rep.Stopped)
	require.Len(t, e.queue.take(t), 250)
}

func TestBudgetStopsTheRunAndTheNextRunContinues(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.supervisor(t, func(c *Config) { c.PageSize = 100; c.Budget = 15 * time.Second })
	for i := 0; i < 250; i++ {
		e.submitClaimed(t, fmt.Sprintf("o-%03d", i), 1)
	}
	e.clock.Set(T0.Add(stepTimeout))
	// Every write takes 100ms of (fake) time: 150 fit in the budget.
	e.store.afterRescue = func(sas.RescueParams) { e.clock.Advance(100 * time.Millisecond) }

	rep := runOnce(t, s)
	require.Equal(t, StopBudget, rep.Stopped)
	require.Equal(t, 150, rep.Rescued)
	require.Equal(t, 15*time.Second, rep.Elapsed)
	require.Len(t, e.queue.take(t), 150, "the page cut short by the budget still sent its retries")

	rep = runOnce(t, s)
	require.Equal(t, StopDrained, rep.Stopped)
	require.Equal(t, 100, rep.Rescued)
	require.Len(t, e.queue.take(t), 100)
	for i := 0; i < 250; i++ {
		require.Equal(t, 1, e.step(t, fmt.Sprintf("o-%03d", i), 0).FailureCount)
	}
}

// A record handed back with a short pick-up deadline may be due again before
// the sweep ends; it must not run through all its failures in one sweep,
// before any scheduler had the chance to claim it.
func TestEachRecordAtMostOncePerRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.supervisor(t, func(c *Config) { c.BaseBackoff = time.Second; c.PickupTimeout = time.Second })
	e.submitClaimed(t, "o-once", 1)
	e.clock.Set(T0.Add(stepTimeout))
	e.store.afterRescue = func(sas.RescueParams) { e.clock.Advance(5 * time.Second) }
	rep := runOnce(t, s)
	require.Equal(t, 1, rep.Rescued)
	require.Zero(t, rep.GaveUp)
	require.Equal(t, 1, e.step(t, "o-once", 0).FailureCount)
}

func TestCanceledContextStopsTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.supervisor(t)
	e.submitClaimed(t, "o-c", 1)
	e.clock.Set(T0.Add(stepTimeout))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	rep, err := s.RunOnce(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, StopCanceled, rep.Stopped)
	require.Zero(t, rep.Pages)
	require.Equal(t, sas.Processing, e.step(t, "o-c", 0).ProcessState)
}

func TestFindDueFailureIsAnError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.supervisor(t, func(c *Config) { c.Store = failingFind{e.store} })
	rep, err := s.RunOnce(t.Context())
	require.ErrorContains(t, err, "finding due Processing steps: throughput exceeded")
	require.Equal(t, 3, rep.Errors, "one per state; each state is still tried")
	require.Equal(t, StopDrained, rep.Stopped)
}

type failingFind struct{ sas.StateStore }

func (failingFind) FindDue(context.Context, sas.FindDueParams) (sas.FindDueResult, error) {
	return sas.FindDueResult{}, errors.New("throughput exceeded")
}

// Several supervisors at once: every stuck step is rescued exactly once,
// by whichever supervisor's fenced write lands first.
func TestSeveralSupervisorsAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const steps, sups = 200, 6
	for i := 0; i < steps; i++ {
		e.submitClaimed(t, fmt.Sprintf("o-%03d", i), 2)
	}
	e.clock.Set(T0.Add(stepTimeout + time.Second))

	reports := make([]Report, sups)
	errs := make([]error, sups)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < sups; i++ {
		s := e.supervisor(t, func(c *Config) { c.Actor = fmt.Sprintf("sup-%d", i); c.PageSize = 25 })
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			reports[i], errs[i] = s.RunOnce(context.Background())
		}()
	}
	close(start)
	wg.Wait()

	var rescued, lost int
	for i := range reports {
		require.NoError(t, errs[i])
		require.Zero(t, reports[i].Errors)
		require.Zero(t, reports[i].GaveUp)
		rescued += reports[i].Rescued
		lost += reports[i].LostRaces
	}
	require.Equal(t, steps, rescued, "each step rescued by exactly one supervisor")
	t.Logf("%d supervisors: %d rescues, %d lost races", sups, rescued, lost)

	perStep := map[sas.StepKey]int{}
	for _, m := range e.queue.take(t) {
		require.Equal(t, sas.KindRetry, m.Kind)
		require.Equal(t, 1, m.Retry.Attempt)
		perStep[key(m.Retry.OrderID, m.Retry.Step)]++
	}
	require.Len(t, perStep, steps)
	for k, n := range perStep {
		require.Equal(t, 1, n, "retries sent for %s", k)
	}
	for i := 0; i < steps; i++ {
		id := fmt.Sprintf("o-%03d", i)
		r := e.step(t, id, 0) // checks the history is legal
		require.Equal(t, sas.Pending, r.ProcessState)
		require.Equal(t, 1, r.FailureCount, "%s", id)
		require.True(t, strings.HasPrefix(r.History[len(r.History)-1].Actor, "sup-"))
		require.Equal(t, sas.Pending, e.step(t, id, 1).ProcessState)
	}
}

func TestRunTicksAroundRunOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// Nothing is due: a sweep is one query per state. The third sweep's last
	// query cancels, so the loop ends right after it.
	e.store.afterFindDue = func(sas.FindDueParams, sas.FindDueResult) {
		if e.store.findDues.Load() == 9 {
			cancel()
		}
	}
	s := e.supervisor(t)
	ticks := make(chan time.Time)
	done := make(chan error, 1)
	go func() { done <- s.run(ctx, ticks) }()
	ticks <- T0 // received once the first sweep is done
	ticks <- T0
	require.ErrorIs(t, <-done, context.Canceled)
	require.Equal(t, int32(9), e.store.findDues.Load(), "three sweeps: one at start, one per tick")

	require.ErrorIs(t, s.Run(ctx, 0), sas.ErrInvalid)
}

// jittered is the supervisor's default retry delay after the failures-th
// failure of attempt of the step at k: 5s doubling, drawn from the upper
// half of the wait by the step and attempt (sas.JitterSeed).
func jittered(failures int, k sas.StepKey, attempt int) time.Duration {
	return sas.RetryPolicy{InitialInterval: DefaultBaseBackoff, MaxInterval: DefaultMaxBackoff}.Interval(failures, sas.JitterSeed(k, attempt))
}
