package scheduler_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

func TestPaymentRunsToProcessed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-pay", "payment", f.replyURL))
	req := f.request()
	f.clock.Advance(2 * time.Second)
	f.deliver(done(req))

	require.Empty(t, f.requests())
	require.Equal(t, []string{"received#1000", "step-done/charge#3001", "processed#4000"}, statusList(f.statuses()))
	v := f.view("o-pay")
	require.Equal(t, []sas.ProcessState{sas.Processed}, f.states("o-pay"))
	require.Empty(t, v.Steps[0].LockedBy)
	require.Equal(t, sas.Processed, v.State())
}

func TestOrderRunsStepsInOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-ord", "order", f.replyURL))
	var names []string
	for i := 0; i < 3; i++ {
		req := f.request()
		require.Equal(t, i, req.Step)
		require.Equal(t, 1, req.Attempt)
		require.Equal(t, owner, req.LockedBy)
		require.False(t, req.Compensation)
		require.Equal(t, f.clock.Now().Add(leaseTime), req.CompleteBy, "each step's deadline runs from its claim")
		require.JSONEq(t, `{"amount":42,"currency":"EUR"}`, string(req.Payload), "every request carries the payload")
		names = append(names, req.StepName)
		f.clock.Advance(time.Second)
		f.deliver(done(req))
	}
	require.Equal(t, []string{"reserve", "charge", "ship"}, names)
	require.Empty(t, f.requests())

	st := f.statuses()
	require.Equal(t, []string{"received#1000", "step-done/reserve#3001", "step-done/charge#5001", "step-done/ship#7001", "processed#8000"}, statusList(st))
	for i := 1; i < len(st); i++ {
		require.Greater(t, st[i].Sequence, st[i-1].Sequence, "sequence numbers grow")
		require.Equal(t, "o-ord", st[i].OrderID)
	}
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processed, sas.Processed}, f.states("o-ord"))
}

// A reply from a holder that is not this instance still completes the step:
// the fence is the holder and attempt the agent echoes, not who reads the reply.
func TestAnyInstanceRecordsTheReply(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-any", "order", ""))
	req := f.request()
	other := f.newService("scheduler-other")
	require.Empty(t, f.handleWith(schedulerHandler(other), f.event(done(req))))
	next := f.request()
	require.Equal(t, "scheduler-other", next.LockedBy, "the successor is claimed by whoever recorded the reply")
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processing, sas.Pending}, f.states("o-any"))
}

// TestDuplicateReply: a reply delivered again finds its step done and
// repeats the effects; the successor's request is sent again on a
// redelivery (the first may have died before sending it) while no pick-up
// was reported, whatever its deadline, and never for a second message.
func TestDuplicateReply(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		advance    time.Duration
		started    bool // the successor's agent reported its pick-up
		duplicate  bool // a second message, not a redelivery
		wantResend bool
	}{
		{"redelivery: the successor's request is sent again", time.Second, false, false, true},
		{"redelivery past the successor's deadline, no pick-up reported: sent again", leaseTime + time.Second, false, false, true},
		{"redelivery after the successor's pick-up was reported: nothing sent", time.Second, true, false, false},
		{"a second message with the same reply: nothing sent", time.Second, false, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.deliver(intake("o-dr", "order", f.replyURL))
			req0 := f.request()
			f.deliver(done(req0))
			req1 := f.request()
			f.statuses()

			f.clock.Advance(tc.advance)
			if tc.started {
				f.started("o-dr", 1)
			}
			if tc.duplicate {
				require.Empty(t, f.handle(f.duplicate(done(req0))))
			} else {
				f.deliver(done(req0))
			}
			if tc.wantResend {
				again := f.request()
				require.Equal(t, req1, again)
				require.Equal(t, stepTimeout.Milliseconds(), again.TimeoutMs, "a re-send carries the agent's limit too")
			} else {
				require.Empty(t, f.requests())
			}
			require.Equal(t, []string{"step-done/reserve#3001"}, statusList(f.statuses()), "the same status, the same number")

			v := f.view("o-dr")
			require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processing, sas.Pending}, f.states("o-dr"))
			require.Equal(t, 1, v.Steps[1].Attempt, "the successor is not claimed twice")
			require.Equal(t, 1, transitions(v.Steps[1], sas.Processing))
			require.Equal(t, 1, transitions(v.Steps[0], sas.Processed))
		})
	}
}

func TestDuplicateReplyOfLastStep(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-dl", "payment", f.replyURL))
	req := f.request()
	f.deliver(done(req))
	f.statuses()
	f.deliver(done(req))
	require.Empty(t, f.requests())
	require.Equal(t, []string{"step-done/charge#3001", "processed#4000"}, statusList(f.statuses()))
	require.Equal(t, []sas.ProcessState{sas.Processed}, f.states("o-dl"))
}

// The same reply delivered to many instances at once: exactly one records
// it and claims the successor.
func TestConcurrentDuplicateReplies(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-cc", "order", ""))
	body := done(f.request())
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		h := schedulerHandler(f.newService("scheduler-" + string(rune('a'+i))))
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := h.Handle(f.ctx, f.event(body))
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Errorf("delivery failed: %v %v", err, resp.BatchItemFailures)
			}
		}()
	}
	wg.Wait()
	v := f.view("o-cc")
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processing, sas.Pending}, f.states("o-cc"))
	require.Equal(t, 1, v.Steps[1].Attempt)
	require.Equal(t, 1, transitions(v.Steps[1], sas.Processing), "one claim of the successor")
	reqs := f.requests()
	require.NotEmpty(t, reqs)
	for _, r := range reqs {
		require.Equal(t, 1, r.Step)
		require.Equal(t, v.Steps[1].LockedBy, r.LockedBy, "every copy of the request names the one holder")
	}
}

func TestStaleReplyAfterRescue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		outcome sas.Outcome
		retried bool // the step was re-claimed after the rescue
	}{
		{"done after rescue", sas.OutcomeDone, false},
		{"failed after rescue", sas.OutcomeFailed, false},
		{"done after re-claim", sas.OutcomeDone, true},
		{"failed after re-claim", sas.OutcomeFailed, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.deliver(intake("o-st", "order", f.replyURL))
			old := f.request()
			f.statuses()
			f.clock.Advance(leaseTime + time.Second)
			f.rescue("o-st", 0)
			want := []sas.ProcessState{sas.Pending, sas.Pending, sas.Pending}
			if tc.retried {
				f.deliver(retryMsg("o-st", 0, 1))
				require.Equal(t, 2, f.request().Attempt)
				want[0] = sas.Processing
			}
			before := f.view("o-st")

			f.deliver(reply(old, tc.outcome, "late"))

			require.Empty(t, f.requests())
			require.Empty(t, f.statuses())
			require.Empty(t, f.alerts.all())
			after := f.view("o-st")
			require.Equal(t, want, f.states("o-st"))
			if tc.outcome == sas.OutcomeFailed {
				require.Equal(t, before.Steps, after.Steps, "a stale failure changes nothing")
				return
			}
			// A stale success changes no state, but its effect may exist:
			// the step owes an undo if the order is compensated.
			require.True(t, after.Steps[0].UndoOwed)
			after.Steps[0].UndoOwed = false
			after.Steps[0].History = after.Steps[0].History[:len(after.Steps[0].History)-1]
			after.Steps[0].UpdatedAt = before.Steps[0].UpdatedAt
			require.Equal(t, before.Steps, after.Steps, "nothing else changed")
		})
	}
}

func TestRetryClaimsAndDispatches(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-rt", "payment", f.replyURL))
	f.request()
	f.clock.Advance(leaseTime + time.Second)
	f.rescue("o-rt", 0)

	f.clock.Advance(5 * time.Second)
	f.deliver(retryMsg("o-rt", 0, 1))
	req := f.request()
	require.Equal(t, 2, req.Attempt)
	require.Equal(t, owner, req.LockedBy)
	require.Equal(t, f.clock.Now().Add(leaseTime), req.CompleteBy)
	require.Equal(t, stepTimeout.Milliseconds(), req.TimeoutMs, "the agent's own limit on every attempt")
	require.Equal(t, "o-rt:0", req.IdempotencyKey, "the same key on every attempt")
	require.False(t, req.Compensation)

	f.deliver(done(req))
	require.Equal(t, []string{"received#1000", "step-done/charge#3002", "processed#4000"}, statusList(f.statuses()))
	v := f.view("o-rt")
	require.Equal(t, []sas.ProcessState{sas.Processed}, f.states("o-rt"))
	require.Equal(t, 1, v.Steps[0].FailureCount)
}

func TestRetryLostRace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(f *fixture) string // returns the retry to deliver
		want  sas.ProcessState
	}{
		{"step held, never rescued", func(f *fixture) string { return retryMsg("o-rl", 0, 1) }, sas.Processing},
		{"stale attempt", func(f *fixture) string {
			f.clock.Advance(leaseTime + time.Second)
			f.rescue("o-rl", 0)
			return retryMsg("o-rl", 0, 0)
		}, sas.Pending},
		// The claim is the one this message asked for and no pick-up was
		// reported: a redelivery re-sends the request (see
		// TestRetryRedeliveredAfterSendFailure); left out here.
		{"another instance claimed it first, its pick-up reported", func(f *fixture) string {
			f.clock.Advance(leaseTime + time.Second)
			f.rescue("o-rl", 0)
			m := retryMsg("o-rl", 0, 1)
			f.requests()
			require.Empty(f.t, f.handleWith(schedulerHandler(f.newService("scheduler-other")), f.event(m)))
			require.Equal(f.t, "scheduler-other", f.request().LockedBy)
			f.clock.Advance(leaseTime + time.Second)
			f.started("o-rl", 0)
			return m
		}, sas.Processing},
		{"the step completed meanwhile", func(f *fixture) string {
			req := f.request()
			f.deliver(done(req))
			return retryMsg("o-rl", 0, 1)
		}, sas.Processed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.deliver(intake("o-rl", "payment", ""))
			m := tc.setup(f)
			f.requests()
			before := f.view("o-rl")

			f.deliver(m)
			require.Empty(t, f.requests(), "nothing dispatched")
			require.Equal(t, before.Steps, f.view("o-rl").Steps, "nothing written")
			require.Equal(t, []sas.ProcessState{tc.want}, f.states("o-rl"))
		})
	}
}
