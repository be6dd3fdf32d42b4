package scheduler_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// Each test makes a side effect fail right after the state write succeeded,
// as a crash between the two would leave it, then redelivers the message:
// the side effect happens exactly once more and the order goes on.

func TestCrashAfterSubmit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		failURL      func(f *fixture) string
		requestsLost int // requests that went out before the failure
	}{
		{"request not sent", func(f *fixture) string { return f.agentURL }, 0},
		{"received not posted", func(f *fixture) string { return f.replyURL }, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ev := f.event(intake("o-cs", "payment", f.replyURL))
			f.failNextSends(tc.failURL(f), 1)
			require.Equal(t, []string{ev.Records[0].MessageId}, f.handle(ev))
			require.Equal(t, []sas.ProcessState{sas.Processing}, f.states("o-cs"), "the order was written")
			require.Len(t, f.requests(), tc.requestsLost)
			require.Empty(t, f.statuses())

			require.Empty(t, f.handle(ev), "the redelivery succeeds")
			req := f.request()
			require.Equal(t, 1, req.Attempt)
			require.Equal(t, []string{"received#1000"}, statusList(f.statuses()))

			f.deliver(done(req))
			require.Equal(t, []sas.ProcessState{sas.Processed}, f.states("o-cs"))
			require.Equal(t, 1, transitions(f.step("o-cs", 0), sas.Processing))
		})
	}
}

func TestCrashAfterComplete(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-cc", "order", f.replyURL))
	ev := f.event(done(f.request()))
	f.statuses()

	f.failNextSends(f.agentURL, 1)
	require.Equal(t, []string{ev.Records[0].MessageId}, f.handle(ev))
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processing, sas.Pending}, f.states("o-cc"), "done and successor claimed, atomically")
	require.Empty(t, f.requests())

	require.Empty(t, f.handle(ev))
	req := f.request()
	require.Equal(t, 1, req.Step)
	require.Equal(t, 1, req.Attempt)
	require.Equal(t, []string{"step-done/reserve#3001"}, statusList(f.statuses()))

	f.deliver(done(req))
	f.deliver(done(f.request()))
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processed, sas.Processed}, f.states("o-cc"))
}

func TestCrashAfterFail(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req := f.runForward("o-cf", "order", 1)
	f.statuses()
	ev := f.event(reply(req, sas.OutcomeFailed, "declined"))

	f.alerts.mu.Lock()
	f.alerts.fail = 1
	f.alerts.mu.Unlock()
	require.Equal(t, []string{ev.Records[0].MessageId}, f.handle(ev))
	// The failed step's own undo comes first, and its claim waits for the
	// failure's alert: after the claim, a redelivery would no longer find
	// the step failed (tellBeforeClaim).
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Error, sas.Pending}, f.states("o-cf"))
	require.Empty(t, f.requests(), "nothing after the failed alert")
	require.Empty(t, f.statuses())

	require.Empty(t, f.handle(ev))
	require.Len(t, f.alerts.all(), 1)
	require.Equal(t, []string{"failed/charge#4001"}, statusList(f.statuses()))
	undo := f.request()
	require.Equal(t, 1, undo.Step, "the refused step is undone too: a duplicate delivery may have made its effect")
	require.True(t, undo.Compensation)
	f.deliver(done(undo))
	undo = f.request()
	require.Equal(t, 0, undo.Step)
	f.deliver(done(undo))
	require.Equal(t, []sas.ProcessState{sas.Compensated, sas.Compensated, sas.Pending}, f.states("o-cf"))
}

func TestCrashAfterUndoClaim(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req := f.runForward("o-cu", "order", 1)
	f.statuses()
	ev := f.event(reply(req, sas.OutcomeFailed, "declined"))

	f.failNextSends(f.agentURL, 1)
	require.Equal(t, []string{ev.Records[0].MessageId}, f.handle(ev))
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Compensating, sas.Pending}, f.states("o-cu"))
	require.Empty(t, f.requests())

	require.Empty(t, f.handle(ev))
	undo := f.request()
	require.Equal(t, 1, undo.Step)
	require.Equal(t, 2, undo.Attempt, "the undo claimed by the first delivery, not a new one")
	require.Len(t, f.alerts.all(), 1, "told before the claim, once")
	require.Equal(t, []string{"failed/charge#4001"}, statusList(f.statuses()))
	require.Equal(t, 1, transitions(f.step("o-cu", 1), sas.Compensating))
}

func TestRetryRedeliveredAfterSendFailure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		redeliver  func(f *fixture, ev string) []string
		advance    time.Duration
		started    bool
		wantResend bool
	}{
		{"same instance: request sent again", func(f *fixture, b string) []string { return f.handle(f.event(b)) }, time.Second, false, true},
		// Nobody else sends it: the supervisor waits on a step with no
		// pick-up reported, so the redelivery does, however late.
		{"same instance, past the deadline, no pick-up reported: sent again", func(f *fixture, b string) []string { return f.handle(f.event(b)) }, leaseTime + time.Second, false, true},
		{"pick-up reported: the request got out, nothing sent", func(f *fixture, b string) []string { return f.handle(f.event(b)) }, time.Second, true, false},
		// One failed send is not a lost lease: whoever handles the
		// redelivery re-sends the request.
		{"another instance (the first one died): request sent again", func(f *fixture, b string) []string {
			return f.handleWith(schedulerHandler(f.newService("scheduler-new")), f.event(b))
		}, time.Second, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.deliver(intake("o-rr", "payment", ""))
			f.request()
			f.clock.Advance(leaseTime + time.Second)
			f.rescue("o-rr", 0)

			body := retryMsg("o-rr", 0, 1)
			f.failNextSends(f.agentURL, 1)
			require.Len(t, f.handle(f.event(body)), 1)
			require.Equal(t, 2, f.step("o-rr", 0).Attempt)
			require.Empty(t, f.requests())

			f.clock.Advance(tc.advance)
			if tc.started {
				f.started("o-rr", 0)
			}
			require.Empty(t, tc.redeliver(f, body))
			if !tc.wantResend {
				require.Empty(t, f.requests())
				require.Equal(t, []sas.ProcessState{sas.Processing}, f.states("o-rr"))
				return
			}
			req := f.request()
			require.Equal(t, 2, req.Attempt)
			require.Equal(t, stepTimeout.Milliseconds(), req.TimeoutMs, "a re-sent request carries the agent's limit")
			f.deliver(done(req))
			require.Equal(t, []sas.ProcessState{sas.Processed}, f.states("o-rr"))
		})
	}
}
