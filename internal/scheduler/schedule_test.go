package scheduler_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
)

// scheduleFixture is a fixture whose scheduler knows the schedules
// "nightly" (overlap skip, triggered by the role AROASCHED) and "hourly"
// (allow, any sender).
func scheduleFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	reg, err := registry.Default(stepTimeout)
	require.NoError(t, err)
	f.svc = f.newServiceConfig(owner, reg, sas.AgentQueues{Default: f.agentURL}, func(c *scheduler.Config) {
		c.Schedules = map[string]sas.ScheduleConfig{
			"nightly": {Overlap: sas.OverlapSkip, Senders: []string{"AROASCHED"}},
			"hourly":  {},
		}
	})
	f.h = scheduler.NewHandler(f.svc)
	return f
}

// runIntake is a schedule's trigger for the run scheduled at hour h of t0's
// day, as the construct's target input writes it (no order id).
func runIntake(schedule string, h int) string {
	b, _ := json.Marshal(map[string]any{"v": 1, "workflow": "payment", "payload": map[string]any{"amount": 42},
		"schedule": schedule, "scheduledAt": runTime(h).Format(time.RFC3339)})
	return string(b)
}

func runTime(h int) time.Time { return t0.Truncate(24 * time.Hour).Add(time.Duration(h) * time.Hour) }

func runID(schedule string, h int) string { return sas.RunOrderID(schedule, runTime(h)) }

// sentBy delivers bodies as sent by sender (SQS's SenderId).
func (f *fixture) sentBy(sender string, bodies ...string) {
	f.t.Helper()
	ev := f.event(bodies...)
	for i := range ev.Records {
		ev.Records[i].Attributes = map[string]string{"SenderId": sender}
	}
	require.Empty(f.t, f.handle(ev))
}

// A run's order id is its schedule's and its scheduled time's: every copy
// of one trigger (in one batch, or redelivered) is one order, whose first
// step is requested once, however many copies come.
func TestARunStartsOnceWhateverItsCopies(t *testing.T) {
	t.Parallel()
	f := scheduleFixture(t)
	f.sentBy("AROASCHED:scheduler", runIntake("nightly", 2), runIntake("nightly", 2))
	f.sentBy("AROASCHED:scheduler", runIntake("nightly", 2))
	v := f.view(runID("nightly", 2))
	require.Equal(t, "nightly-"+runTime(2).Format(time.RFC3339), v.Order.OrderID)
	reqs := f.requests()
	require.NotEmpty(t, reqs)
	for _, r := range reqs {
		require.Equal(t, runID("nightly", 2), r.OrderID, "one order")
		require.Equal(t, 1, r.Attempt, "its first claim alone: a copy re-sends the live request, never claims again")
	}
	st, err := f.mem.GetSchedule(f.ctx, "nightly")
	require.NoError(t, err)
	require.Equal(t, 1, st.Runs)
	require.Equal(t, runID("nightly", 2), st.Running)
}

// Skip: a run that falls due while the previous run is in flight is
// skipped, recorded in the schedule's state, and never created; once the
// previous run has settled, the next run starts; a late copy of a skipped
// run, or of a run older than the last started, starts nothing.
func TestSkipWhileThePreviousRunIsInFlight(t *testing.T) {
	t.Parallel()
	f := scheduleFixture(t)
	f.sentBy("AROASCHED:a", runIntake("nightly", 1))
	first := f.request()

	f.sentBy("AROASCHED:a", runIntake("nightly", 2), runIntake("nightly", 2))
	f.requireNoOrder(runID("nightly", 2))
	require.Empty(t, f.requests())
	st, err := f.mem.GetSchedule(f.ctx, "nightly")
	require.NoError(t, err)
	require.Equal(t, 1, st.Skipped, "a copy of a skipped run is not counted again")
	require.Equal(t, runID("nightly", 2), st.LastSkipped)

	f.deliver(done(first)) // the payment workflow's one step: the run settles
	require.True(t, f.view(runID("nightly", 1)).Settled())
	f.sentBy("AROASCHED:a", runIntake("nightly", 2)) // a late copy of the skipped run
	f.requireNoOrder(runID("nightly", 2))
	f.sentBy("AROASCHED:a", runIntake("nightly", 3))
	require.Equal(t, runID("nightly", 3), f.request().OrderID)
	f.sentBy("AROASCHED:a", runIntake("nightly", 1)) // a copy of the first run: the same order
	f.sentBy("AROASCHED:a", runIntake("nightly", 0)) // older than the last started
	f.requireNoOrder(runID("nightly", 0))
	st, err = f.mem.GetSchedule(f.ctx, "nightly")
	require.NoError(t, err)
	require.Equal(t, sas.ScheduleState{Name: "nightly", Running: runID("nightly", 3), LastRunAt: runTime(3), Runs: 2,
		Skipped: 2, LastSkipped: runID("nightly", 0), LastSkippedAt: runTime(0)}, st)
}

// Allow starts every run, whatever is in flight.
func TestAllowStartsEveryRun(t *testing.T) {
	t.Parallel()
	f := scheduleFixture(t)
	f.deliver(runIntake("hourly", 1), runIntake("hourly", 2))
	require.Len(t, f.requests(), 2)
	st, err := f.mem.GetSchedule(f.ctx, "hourly")
	require.NoError(t, err)
	require.Equal(t, 2, st.Runs)
}

// Two schedulers deciding a skip run at once, both reading the previous
// run settled: the store's fence lets one start, and the other, deciding
// again, skips (sas.RunClaim).
func TestRacingRunsStartOneUnderSkip(t *testing.T) {
	t.Parallel()
	f := scheduleFixture(t)
	f.sentBy("AROASCHED:a", runIntake("nightly", 1))
	f.deliver(done(f.request()))
	// The second scheduler's read sees run 1 as the running order; the
	// first then starts run 2 before the second writes run 3.
	f.store.beforeSubmit = func(p sas.SubmitParams) {
		if p.Run != nil && p.Order.OrderID == runID("nightly", 3) {
			f.store.beforeSubmit = nil
			f.sentBy("AROASCHED:b", runIntake("nightly", 2))
		}
	}
	f.sentBy("AROASCHED:a", runIntake("nightly", 3))
	f.requireNoOrder(runID("nightly", 3))
	reqs := f.requests()
	require.Len(t, reqs, 1)
	require.Equal(t, runID("nightly", 2), reqs[0].OrderID)
	st, err := f.mem.GetSchedule(f.ctx, "nightly")
	require.NoError(t, err)
	require.Equal(t, 2, st.Runs)
	require.Equal(t, runID("nightly", 3), st.LastSkipped)
}

// Only a schedule's own role starts its runs, and a run's order id is
// reserved to its trigger: an intake that names no schedule cannot take it
// first (and so have the real run dropped as another submitter's).
func TestRunsAreTheSchedulesOwn(t *testing.T) {
	t.Parallel()
	f := scheduleFixture(t)
	bad := func(sender, body, want string) {
		t.Helper()
		var in map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &in))
		in["replyTo"] = f.replyURL
		b, _ := json.Marshal(in)
		f.sentBy(sender, string(b))
		sts := f.statuses()
		require.Len(t, sts, 1)
		require.Equal(t, sas.StatusRejected, sts[0].Status)
		require.Contains(t, sts[0].Reason, want)
	}
	bad("AROAAPP:i-1", runIntake("nightly", 1), "AROAAPP may not start runs of schedule nightly")
	bad("AROAAPP:i-1", intake(runID("nightly", 1), "payment", ""), "only its trigger starts")
	bad("AROASCHED:a", runIntake("weekly", 1), `"weekly" is not a schedule of this deployment`)
	var in map[string]any
	require.NoError(t, json.Unmarshal([]byte(runIntake("nightly", 1)), &in))
	in["orderId"] = "nightly-by-hand"
	b, _ := json.Marshal(in)
	bad("AROASCHED:a", string(b), "a run of schedule nightly scheduled for")
	f.requireNoOrder(runID("nightly", 1))

	// Any id that is not a listed schedule's run is an ordinary order.
	f.sentBy("AROAAPP:i-1", intake(runID("weekly", 1), "payment", ""))
	f.view(runID("weekly", 1))
}

func (s *faultyStore) GetSchedule(ctx context.Context, name string) (sas.ScheduleState, error) {
	if hook := s.beforeGetSchedule; hook != nil {
		hook()
	}
	return s.StateStore.GetSchedule(ctx, name)
}

// Two copies of one trigger under skip, the second reading "no order"
// just before the first submits the run: the second then reads the
// schedule's running order as its own run, which is that run, not one in
// flight over it (the simulator's seed 4168: it was recorded skipped, and
// the run's request, which its first copy died before sending, never went).
func TestACopyThatSeesItsOwnRunStartedIsThatRun(t *testing.T) {
	t.Parallel()
	f := scheduleFixture(t)
	f.store.beforeGetSchedule = func() {
		f.store.beforeGetSchedule = nil
		f.sentBy("AROASCHED:a", runIntake("nightly", 2)) // the first copy, whole
	}
	f.sentBy("AROASCHED:b", runIntake("nightly", 2)) // the second: read no order first
	st, err := f.mem.GetSchedule(f.ctx, "nightly")
	require.NoError(t, err)
	require.Equal(t, runID("nightly", 2), st.Running)
	require.Zero(t, st.Skipped, "the run is not skipped by a copy of itself")
	require.Empty(t, st.LastSkipped)
	reqs := f.requests()
	require.NotEmpty(t, reqs)
	for _, r := range reqs {
		require.Equal(t, 1, r.Attempt)
	}
}

func (s *faultyStore) Submit(ctx context.Context, p sas.SubmitParams) (sas.SubmitResult, error) {
	if hook := s.beforeSubmit; hook != nil {
		hook(p)
	}
	return s.StateStore.Submit(ctx, p)
}

// A failed run whose failed step still waits for its own undo is in flight
// (the simulator's seed 9501): the order reads settled between the failure
// and the claim of that undo, and a run then would overlap the undo. Once
// the undo is done, the next run starts.
func TestAFailedRunAwaitingItsUndoIsInFlight(t *testing.T) {
	t.Parallel()
	f := scheduleFixture(t)
	f.sentBy("AROASCHED:a", runIntake("nightly", 1))
	req := f.request()
	// The holder's failure, with an effect (not a refusal), written alone:
	// the scheduler that made it has not yet claimed the step's undo.
	_, err := f.mem.Fail(f.ctx, sas.FailParams{Key: sas.StepKey{OrderID: req.OrderID}, Owner: req.LockedBy, Attempt: req.Attempt,
		Now: f.clock.Now(), Reason: "timed out mid-call", Effect: true})
	require.NoError(t, err)
	require.True(t, f.view(req.OrderID).Settled(), "the moment the order reads settled")
	f.sentBy("AROASCHED:a", runIntake("nightly", 2))
	f.requireNoOrder(runID("nightly", 2))
}

// A cancelled run whose step settled and still waits for its undo is in
// flight: the order reads settled between the step's completion (no
// successor: the cancel's mark) and the claim of its undo, and a run then
// would overlap the undo (make sim, after schedules met cancellation).
// Once the undo is done, the next run starts.
func TestACancelledRunAwaitingItsUndoIsInFlight(t *testing.T) {
	t.Parallel()
	f := scheduleFixture(t)
	f.sentBy("AROASCHED:a", runIntake("nightly", 1))
	req := f.request()
	key := sas.StepKey{OrderID: req.OrderID}
	_, err := f.mem.Cancel(f.ctx, sas.CancelParams{Key: key, From: sas.Processing, Attempt: req.Attempt, Now: f.clock.Now(), Actor: "operator"})
	require.NoError(t, err)
	// The marked step's success, written alone: the scheduler that made it
	// has not yet claimed its undo.
	_, err = f.mem.Complete(f.ctx, sas.CompleteParams{Key: key, Owner: req.LockedBy, Attempt: req.Attempt, Now: f.clock.Now(), Cancelled: true})
	require.NoError(t, err)
	require.True(t, f.view(req.OrderID).Settled(), "the moment the order reads settled")
	f.sentBy("AROASCHED:a", runIntake("nightly", 2))
	f.requireNoOrder(runID("nightly", 2))

	f.operatorCancel(req.OrderID) // the cancel's redelivery: the undo goes out
	undo := f.request()
	require.True(t, undo.Compensation)
	f.deliver(done(undo))
	require.Equal(t, sas.Cancelled, f.view(req.OrderID).State())
	f.sentBy("AROASCHED:a", runIntake("nightly", 3))
	require.Len(t, f.requests(), 1, "the next run starts once the cancelled one is undone")
}
