package scheduler_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
	"github.com/sas-go/sas/workflow"
)

// undoAll completes every undo request as it comes and returns the steps
// undone, in order.
func (f *fixture) undoAll() []int {
	f.t.Helper()
	var steps []int
	for {
		reqs := f.requests()
		if len(reqs) == 0 {
			return steps
		}
		require.Len(f.t, reqs, 1, "one undo at a time")
		req := reqs[0]
		require.True(f.t, req.Compensation, "only undos once the order is compensating")
		require.Equal(f.t, sas.IdempotencyKey(req.OrderID, req.Step, 0, true), req.IdempotencyKey)
		steps = append(steps, req.Step)
		f.clock.Advance(time.Second)
		f.deliver(done(req))
	}
}

func TestPermanentFailureCompensatesNewestFirst(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		workflow     string
		doneBefore   int // steps completed before the failing one
		wantUndo     []int
		wantStatuses []string
		wantStates   []sas.ProcessState
	}{
		{"last step fails: undo charge, then reserve", "order", 2, []int{1, 0},
			[]string{"received#1000", "step-done/reserve#3001", "step-done/charge#5001", "failed/ship#6001", "compensated#15000"},
			[]sas.ProcessState{sas.Compensated, sas.Compensated, sas.Error}},
		// A refused step is undone too (its key's effect may exist from a
		// duplicate delivery; docs/protocol.md, "A refusal is not proof").
		{"middle step fails: undo charge, then reserve", "order", 1, []int{1, 0},
			[]string{"received#1000", "step-done/reserve#3001", "failed/charge#4001", "compensated#15000"},
			[]sas.ProcessState{sas.Compensated, sas.Compensated, sas.Pending}},
		{"first step fails: its own undo", "payment", 0, []int{0},
			[]string{"received#1000", "failed/charge#2001", "compensated#7000"},
			[]sas.ProcessState{sas.Compensated}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			req := f.runForward("o-pf", tc.workflow, tc.doneBefore)
			require.Equal(t, tc.doneBefore, req.Step)
			f.clock.Advance(time.Second)
			f.deliver(reply(req, sas.OutcomeFailed, "declined by the bank"))

			alerts := f.alerts.all()
			require.Len(t, alerts, 1)
			require.Equal(t, sas.Alert{
				OrderID: "o-pf", Step: req.Step, StepName: req.StepName, State: sas.Error, Reason: "declined by the bank",
				Attempts: 1, Failures: 0, At: f.clock.Now(), Source: "scheduler",
				ID: sas.AlertID(sas.StepKey{OrderID: "o-pf", Step: req.Step}, sas.Error, 1),
			}, alerts[0])

			require.Equal(t, tc.wantUndo, f.undoAll())
			st := f.statuses()
			require.Equal(t, tc.wantStatuses, statusList(st))
			for _, s := range st {
				if s.Status == sas.StatusFailed {
					require.Equal(t, "declined by the bank", s.Reason)
				}
			}
			require.Equal(t, tc.wantStates, f.states("o-pf"))
			v := f.view("o-pf")
			require.Equal(t, "declined by the bank", v.Steps[req.Step].LastError)
			for _, s := range tc.wantUndo {
				require.Equal(t, 2, v.Steps[s].Attempt, "an undo is an attempt of its own")
			}
		})
	}
}

func TestCompensationFailure(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req := f.runForward("o-cf", "order", 1)
	f.deliver(reply(req, sas.OutcomeFailed, "declined"))
	refund := f.request()
	require.Equal(t, 1, refund.Step, "the refused charge's undo first")
	f.deliver(done(refund))
	undo := f.request()
	require.Equal(t, 0, undo.Step)
	require.True(t, undo.Compensation)
	require.Equal(t, stepTimeout.Milliseconds(), undo.TimeoutMs, "an undo carries the agent's limit too")

	f.clock.Advance(time.Second)
	undoFailed := reply(undo, sas.OutcomeFailed, "reservation already shipped")
	f.deliver(undoFailed)

	require.Empty(t, f.requests(), "the chain stops at a failed undo")
	alerts := f.alerts.all()
	require.Len(t, alerts, 2)
	require.Equal(t, sas.CompensationFailed, alerts[1].State)
	require.Equal(t, "reserve", alerts[1].StepName)
	require.Equal(t, "reservation already shipped", alerts[1].Reason)
	require.Equal(t, 2, alerts[1].Attempts)
	st := f.statuses()
	require.Equal(t, []string{"received#1000", "step-done/reserve#3001", "failed/charge#4001", "failed/reserve#13002"}, statusList(st))
	require.Equal(t, "compensation failed: reservation already shipped", st[3].Reason)
	require.Equal(t, []sas.ProcessState{sas.CompensationFailed, sas.Compensated, sas.Pending}, f.states("o-cf"))

	// A duplicate of the failed undo repeats the alert and the status (the
	// first delivery may have died before them) and changes nothing.
	f.deliver(undoFailed)
	require.Empty(t, f.requests())
	require.Len(t, f.alerts.all(), 3)
	require.Equal(t, []string{"failed/reserve#13002"}, statusList(f.statuses()))

	// A late duplicate of the charge's failure does not restart a failed
	// undo: that is an operator's call.
	f.deliver(reply(req, sas.OutcomeFailed, "declined"))
	require.Empty(t, f.requests())
	require.Equal(t, []sas.ProcessState{sas.CompensationFailed, sas.Compensated, sas.Pending}, f.states("o-cf"))
	f.statuses()

	// The operator fixes the cause and asks again: only the failed undo is
	// retried (the charge's refund is done).
	f.clock.Advance(time.Minute)
	f.deliver(compensateMsg("o-cf"))
	retry := f.request()
	require.Equal(t, 0, retry.Step)
	require.Equal(t, 3, retry.Attempt)
	require.True(t, retry.Compensation)
	f.deliver(done(retry))
	require.Equal(t, []string{"compensated#15000"}, statusList(f.statuses()))
	require.Equal(t, []sas.ProcessState{sas.Compensated, sas.Compensated, sas.Pending}, f.states("o-cf"))
}

func TestCompensateAfterSupervisorGaveUp(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.runForward("o-gu", "order", 1)
	f.statuses()
	f.clock.Advance(leaseTime + time.Second)
	f.giveUp("o-gu", 1)

	f.deliver(compensateMsg("o-gu"))
	require.Equal(t, []string{"failed/charge#4001"}, statusList(f.statuses()), "the submitter learns of the failure")
	undo := f.request()
	require.Equal(t, 1, undo.Step, "a step given up on may have charged: refund it first")
	require.Equal(t, 2, undo.Attempt)

	// A duplicate compensate while the undo runs re-sends it, claims nothing.
	f.deliver(compensateMsg("o-gu"))
	require.Equal(t, undo, f.request())
	require.Empty(t, f.statuses(), "the failure was told before the undo was claimed")

	f.deliver(done(undo))
	require.Equal(t, []int{0}, f.undoAll())
	require.Equal(t, []string{"compensated#15000"}, statusList(f.statuses()))
	require.Equal(t, []sas.ProcessState{sas.Compensated, sas.Compensated, sas.Pending}, f.states("o-gu"))
	// The give-up above was written but its alert never sent (as when the
	// supervisor's run died): the compensation claim, which clears what the
	// give-up owes, was made only after delivering it, under its own id.
	alerts := f.alerts.all()
	require.Len(t, alerts, 1, "the owed alert, once")
	require.Equal(t, sas.AlertID(sas.StepKey{OrderID: "o-gu", Step: 1}, sas.Error, 1), alerts[0].ID)
	require.Equal(t, "supervisor", alerts[0].Source)

	// After the end, another compensate only repeats "compensated".
	f.deliver(compensateMsg("o-gu"))
	require.Empty(t, f.requests())
	require.Equal(t, []string{"compensated#15000"}, statusList(f.statuses()))
}

func TestCompensateProcessedOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.runForward("o-rev", "order", 3)
	f.statuses()
	f.deliver(compensateMsg("o-rev"))
	require.Equal(t, []int{1, 0}, f.undoAll(), "ship has no undo")
	require.Equal(t, []string{"compensated#15000"}, statusList(f.statuses()))
	require.Equal(t, []sas.ProcessState{sas.Compensated, sas.Compensated, sas.Processed}, f.states("o-rev"))
}

func TestCompensateRefusedWhileInFlight(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(f *fixture)
		want  []sas.ProcessState
	}{
		{"a step is processing", func(*fixture) {}, []sas.ProcessState{sas.Processed, sas.Processing, sas.Pending}},
		{"a step waits for its retry", func(f *fixture) {
			f.clock.Advance(leaseTime + time.Second)
			f.rescue("o-if", 1)
		}, []sas.ProcessState{sas.Processed, sas.Pending, sas.Pending}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.runForward("o-if", "order", 1)
			tc.setup(f)
			f.statuses()
			before := f.view("o-if")

			f.deliver(compensateMsg("o-if"))
			require.Empty(t, f.requests())
			require.Empty(t, f.statuses())
			require.Equal(t, before.Steps, f.view("o-if").Steps)
			require.Equal(t, tc.want, f.states("o-if"))
		})
	}
}

func TestUndoRescuedAndRetried(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req := f.runForward("o-ur", "order", 2)
	f.deliver(reply(req, sas.OutcomeFailed, "no such address")) // ship: nothing to undo
	f.deliver(done(f.request()))                                // the refund
	hung := f.request()
	require.Equal(t, 2, hung.Attempt)

	f.clock.Advance(leaseTime + time.Second)
	r := f.rescue("o-ur", 0)
	require.Equal(t, sas.Compensating, r.ProcessState)
	require.Empty(t, r.LockedBy)

	f.deliver(done(hung))
	require.Empty(t, f.requests(), "the hung undo's late reply is stale")
	require.Equal(t, sas.Compensating, f.step("o-ur", 0).ProcessState)

	f.deliver(retryMsg("o-ur", 0, 2))
	again := f.request()
	require.True(t, again.Compensation, "a rescued undo is re-claimed as an undo")
	require.Equal(t, 3, again.Attempt)
	require.Equal(t, "o-ur:0:undo", again.IdempotencyKey)
	f.deliver(done(again))

	require.Equal(t, []string{"received#1000", "step-done/reserve#3001", "step-done/charge#5001", "failed/ship#6001", "compensated#15000"}, statusList(f.statuses()))
	v := f.view("o-ur")
	require.Equal(t, []sas.ProcessState{sas.Compensated, sas.Compensated, sas.Error}, f.states("o-ur"))
	require.Equal(t, 1, v.Steps[0].FailureCount)
}

func TestDuplicateUndoReply(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req := f.runForward("o-du", "order", 2)
	f.deliver(reply(req, sas.OutcomeFailed, "no such address"))
	undo1 := f.request()
	f.deliver(done(undo1))
	undo0 := f.request()
	f.statuses()

	f.deliver(done(undo1))
	require.Equal(t, undo0, f.request(), "the next undo's request is sent again while its lease runs")
	require.Empty(t, f.statuses())
	require.Equal(t, 2, f.step("o-du", 0).Attempt, "not claimed twice")

	f.deliver(done(undo0))
	f.deliver(done(undo0))
	require.Empty(t, f.requests())
	require.Equal(t, []string{"compensated#15000", "compensated#15000"}, statusList(f.statuses()))
	require.Equal(t, []sas.ProcessState{sas.Compensated, sas.Compensated, sas.Error}, f.states("o-du"))
}

func TestFailureWithoutReplyTo(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-nr", "payment", ""))
	f.deliver(reply(f.request(), sas.OutcomeFailed, "card expired"))
	require.Len(t, f.alerts.all(), 1, "the operator is told even when the caller is not")
	require.Empty(t, f.statuses())
	require.Empty(t, f.statusesAt(f.otherURL))
	require.Equal(t, []sas.ProcessState{sas.Compensating}, f.states("o-nr"), "the refused charge's undo runs")
}

// An operator's compensate whose undo claim loses to a resubmit made
// between its read and its claim plans again, finds the resubmitted step
// ready, and claims nothing: the resubmit wins, and the step runs on
// alone (the simulator's seed 5890: the undo was claimed on the second
// plan, and the step's retry claimed it beside the undo).
func TestACompensateThatLosesToAResubmitClaimsNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	reg, err := registry.FromDefinitions([]workflow.Workflow{{Name: "ro", Steps: []workflow.Step{
		{Name: "reserve", Agent: "x", Action: "POST /reserve", Undo: "POST /release", Timeout: workflow.Duration(stepTimeout)},
		{Name: "charge", Agent: "x", Action: "POST /charge", Timeout: workflow.Duration(stepTimeout)}, // no undo: the plan undoes reserve
	}}})
	require.NoError(t, err)
	f.svc = f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL})
	f.h = schedulerHandler(f.svc)
	req := f.runForward("o-rs", "ro", 1) // reserve done, charge in flight
	_, err = f.mem.Fail(f.ctx, sas.FailParams{Key: sas.StepKey{OrderID: "o-rs", Step: 1}, Owner: req.LockedBy, Attempt: req.Attempt,
		Now: f.clock.Now(), Reason: "card declined"}) // failed; its compensation not started (its handler died)
	require.NoError(t, err)

	rs := &raceStore{StateStore: f.calls}
	rs.hook = func() { f.resubmit("o-rs", 1) }
	racing := f.newServiceConfig("scheduler-3", reg, sas.AgentQueues{Default: f.agentURL}, func(c *scheduler.Config) { c.Store = rs })
	err = racing.Compensate(f.ctx, sas.Compensate{V: sas.MessageVersion, Kind: sas.KindCompensate, OrderID: "o-rs", Actor: "operator"})
	var dropped *scheduler.DropError
	require.ErrorAs(t, err, &dropped, "refused, with the reason")
	require.Contains(t, err.Error(), "step 1 (charge) is Pending again (resubmitted meanwhile)")
	require.Empty(t, f.requests(), "no undo is sent")
	require.Equal(t, sas.Processed, f.step("o-rs", 0).ProcessState, "reserve is not being undone")

	f.deliver(retryMsg("o-rs", 1, f.step("o-rs", 1).Attempt))
	charge := f.request()
	require.False(t, charge.Compensation)
	require.Equal(t, 1, charge.Step, "the resubmitted step runs")
	f.deliver(done(charge))
	require.Equal(t, sas.Processed, f.view("o-rs").State())
}
