package scheduler_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// transient is the agent's transient outcome for req (issue 19).
func transient(req sas.AgentRequest, errorType, reason string) string {
	return strings.Replace(reply(req, sas.OutcomeTransient, reason), `"outcome"`, `"errorType":"`+errorType+`","outcome"`, 1)
}

// nextRequest advances the clock until the delayed request of the next
// attempt becomes visible, and returns it and the wait.
func (f *fixture) nextRequest() (sas.AgentRequest, time.Duration) {
	f.t.Helper()
	reqs, wait := f.nextRequests()
	require.Len(f.t, reqs, 1)
	return reqs[0], wait
}

func (f *fixture) nextRequests() ([]sas.AgentRequest, time.Duration) {
	f.t.Helper()
	start := f.clock.Now()
	for range 16 * 60 {
		if reqs := f.requests(); len(reqs) > 0 {
			return reqs, f.clock.Now().Sub(start)
		}
		f.clock.Advance(time.Second)
	}
	f.t.Fatal("no request within 16 minutes")
	return nil, 0
}

// A transient outcome is a failed attempt, counted at once: the next
// attempt is claimed and its request sent delayed by the retry policy's
// interval (jittered in [b/2, b], b = 5s·2^(failures-1)); the last attempt's
// failure gives the step up: Error, alert, status, compensation. The
// supervisor has nothing to judge.
func TestTransientOutcomeCountsAFailureAndRetriesAfterTheInterval(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-t", "payment", f.replyURL))
	req := f.request()

	for attempt, maxWait := 1, 5*time.Second; attempt < 3; attempt, maxWait = attempt+1, 2*maxWait {
		require.Equal(t, attempt, req.Attempt)
		f.calls.take()
		f.deliver(transient(req, "", "503 from the remote"))
		calls, _ := f.calls.take()
		require.Equal(t, map[string]int{"GetStep": 1, "Rescue": 1, "Claim": 1}, calls, "one read, the hand-back and the next claim")

		rec := f.view("o-t").Steps[0]
		require.Equal(t, sas.Processing, rec.ProcessState, "the next attempt is claimed at once")
		require.Equal(t, attempt+1, rec.Attempt)
		require.Equal(t, attempt, rec.FailureCount, "counted as a failure, not a wait")
		require.Empty(t, rec.WaitingSince)
		require.Contains(t, rec.LastError, "503 from the remote")

		var wait time.Duration
		req, wait = f.nextRequest()
		require.Equal(t, attempt+1, req.Attempt)
		require.GreaterOrEqual(t, wait, maxWait/2, "jittered, never below half")
		require.LessOrEqual(t, wait, maxWait)
		require.Equal(t, rec.CompleteBy, req.CompleteBy, "the lease covers the wait and the step's timeout")
		require.True(t, req.TransientOutcome)
	}

	f.deliver(transient(req, sas.ErrorCircuitOpen, "circuit open"))
	rec := f.view("o-t").Steps[0]
	require.Equal(t, sas.Compensating, rec.ProcessState, "given up and undone: its effect may exist")
	require.Empty(t, rec.Owes, "what the give-up owed went out")
	alerts := f.alerts.all()
	require.Len(t, alerts, 1)
	require.Equal(t, sas.Error, alerts[0].State)
	require.Equal(t, 3, alerts[0].Failures)
	require.Contains(t, alerts[0].Reason, "CircuitOpen: circuit open (failure 3 of 3: giving up)")
	require.Equal(t, sas.AlertID(rec.Key(), sas.Error, 3), alerts[0].ID)
	undo := f.request()
	require.True(t, undo.Compensation)
	require.Contains(t, statusList(f.statuses()), "failed/charge#2003")

	// A redelivery of the last transient reply re-sends the undo its first
	// delivery claimed (it may have died before sending it) while no
	// pick-up was reported, and repeats nothing else: no second alert.
	f.deliver(transient(req, sas.ErrorCircuitOpen, "circuit open"))
	again := f.request()
	require.Equal(t, sas.TraceID(undo.Trace), sas.TraceID(again.Trace), "the order's trace")
	again.Trace = undo.Trace // a span of the reply's, not the claim's
	require.Equal(t, undo, again, "the same undo, the same attempt")
	require.Len(t, f.alerts.all(), 1)
	f.started("o-t", 0)
	f.deliver(transient(req, sas.ErrorCircuitOpen, "circuit open"))
	require.Empty(t, f.requests(), "its pick-up reported: nothing re-sent")
}

// An undo has its own retry policy, which rides out an outage where the
// step fails fast: its transient outcomes are counted against the undo's
// attempts (20 by default, the wait doubling from 10s to 5m), not the
// step's 3; only the last one gives it up (CompensationFailed, an alert).
func TestTransientUndoFollowsTheUndoRetryPolicy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-u", "payment", f.replyURL))
	req := f.request()
	for range 2 {
		f.deliver(transient(req, "", "down"))
		req, _ = f.nextRequest()
	}
	f.deliver(transient(req, "", "down")) // the step's third: given up, undone
	require.Len(t, f.alerts.all(), 1)
	undo := f.request()
	require.True(t, undo.Compensation)
	require.Empty(t, undo.NonRetryable, "the step's non-retryable errors are not the undo's")

	start := f.clock.Now()
	for failures := 1; failures < sas.DefaultUndoMaxAttempts; failures++ {
		f.deliver(transient(undo, "", "the refunds service is down"))
		rec := f.view("o-u").Steps[0]
		require.Equal(t, sas.Compensating, rec.ProcessState, "failure %d: still undoing", failures)
		require.Equal(t, failures, rec.FailureCount)
		require.Contains(t, rec.LastError, fmt.Sprintf("(failure %d of %d: next attempt in", failures, sas.DefaultUndoMaxAttempts))
		var wait time.Duration
		undo, wait = f.nextRequest()
		require.True(t, undo.Compensation)
		ceiling := sas.DefaultUndoRetry.Backoff(failures)
		require.GreaterOrEqual(t, wait, ceiling/2, "failure %d", failures)
		require.LessOrEqual(t, wait, ceiling, "failure %d", failures)
	}
	rode := f.clock.Now().Sub(start)
	require.Len(t, f.alerts.all(), 1, "no alert while the undo rides it out")

	f.deliver(transient(undo, "", "the refunds service is down"))
	rec := f.view("o-u").Steps[0]
	require.Equal(t, sas.CompensationFailed, rec.ProcessState)
	alerts := f.alerts.all()
	require.Len(t, alerts, 2)
	require.Equal(t, sas.CompensationFailed, alerts[1].State)
	require.Equal(t, sas.DefaultUndoMaxAttempts, alerts[1].Failures)
	// Within the policy's bound: the sum of its waits, each at most its
	// ceiling (10s doubling to 5m: 75m10s), and at least half of it.
	var bound time.Duration
	for n := 1; n < sas.DefaultUndoMaxAttempts; n++ {
		bound += sas.DefaultUndoRetry.Backoff(n)
	}
	require.LessOrEqual(t, rode, bound)
	require.GreaterOrEqual(t, rode, bound/2)
	t.Logf("the undo rode out %s before giving up (bound %s)", rode, bound)
}

// A step without an undo and nothing before it to undo: the give-up alerts
// and settles what it owed; no compensation.
func TestTransientGiveUpWithNothingToUndo(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-n", "order", f.replyURL))
	for range 2 {
		f.deliver(done(f.request()))
	}
	req := f.request() // ship: no undo
	for range 2 {
		f.deliver(transient(req, "", "down"))
		req, _ = f.nextRequest()
	}
	f.deliver(transient(req, "", "down"))
	v := f.view("o-n")
	require.Equal(t, sas.Error, v.Steps[2].ProcessState)
	require.Empty(t, v.Steps[2].Owes, "settled")
	require.Len(t, f.alerts.all(), 1)
	// The earlier steps are undone, newest first.
	undo := f.request()
	require.True(t, undo.Compensation)
	require.Equal(t, 1, undo.Step)
}

// A redelivered transient reply after the next attempt was claimed sends
// that attempt's request again (its send may have failed), still delayed;
// a transient reply for an attempt long gone changes nothing.
func TestTransientReplyRedeliveredOrStale(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-r", "payment", f.replyURL))
	first := f.request()
	f.deliver(transient(first, "", "down"))
	f.deliver(transient(first, "", "down")) // a duplicate delivery
	rec := f.view("o-r").Steps[0]
	require.Equal(t, 2, rec.Attempt)
	require.Equal(t, 1, rec.FailureCount, "counted once")
	reqs, _ := f.nextRequests()
	require.Len(t, reqs, 2, "the request, and the duplicate's copy of it")
	second := reqs[0]
	require.Equal(t, reqs[0], reqs[1])
	require.Equal(t, 2, second.Attempt)

	f.deliver(done(second))
	f.deliver(transient(first, "", "down"))
	require.Equal(t, sas.Processed, f.view("o-r").Steps[0].ProcessState)
	require.Equal(t, 1, f.view("o-r").Steps[0].FailureCount)
}

// The service asked for a wait (Retry-After): the next attempt waits at
// least that long.
func TestTransientRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-ra", "payment", f.replyURL))
	req := f.request()
	body := strings.Replace(transient(req, "", "429"), `"outcome"`, `"retryAfterMs":90000,"outcome"`, 1)
	f.deliver(body)
	_, wait := f.nextRequest()
	require.GreaterOrEqual(t, wait, 90*time.Second)
	require.Less(t, wait, 92*time.Second)
}
