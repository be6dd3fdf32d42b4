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

// The holes an outside read of the protocol found (issue 16 §3), each
// replayed here as its sequence, outside the simulator, against the real
// scheduler: each must end right. Hole 1 (a chained undo losing its
// generation on DynamoDB) is the store contract's testWritesReturnWholeRecords,
// run on both stores; hole 2 (a late success of an old generation) is
// TestSuccessAfterTheUndo "after a resubmit". docs/simulation.md lists them.

// Hole 3: a give-up's owed alert is not erased by the compensation. The
// supervisor gives up on the charge (Error, owing an alert and a
// compensate) and dies before sending them; the given-up attempt's late
// done then starts the compensation. Its claim must deliver the owed
// alert and tell the submitter first.
func TestHole3GiveUpAlertSurvivesTheCompensation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	charge := f.runForward("o-h3", "order", 1)
	f.statuses()
	f.clock.Advance(leaseTime + time.Second)
	gaveUp := f.giveUp("o-h3", 1)
	require.Equal(t, sas.Error, gaveUp.ProcessState)
	require.Contains(t, gaveUp.Owes, sas.EffectAlert, "the give-up owes its alert")
	require.Empty(t, f.alerts.all(), "the supervisor died before sending it")

	f.deliver(done(charge)) // the given-up attempt's success, late
	alerts := f.alerts.all()
	require.Len(t, alerts, 1, "the owed alert, delivered before the claim cleared what was owed")
	require.Equal(t, sas.AlertID(gaveUp.Key(), sas.Error, gaveUp.Attempt), alerts[0].ID, "under the give-up's own id: no second page")
	require.Equal(t, []string{"failed/charge#4001"}, statusList(f.statuses()), "the submitter hears the step failed")

	for req := f.requests(); len(req) > 0; req = f.requests() {
		f.deliver(done(req[0]))
	}
	require.Equal(t, []sas.ProcessState{sas.Compensated, sas.Compensated, sas.Pending}, f.states("o-h3"))
	require.Equal(t, []string{"compensated#15000"}, statusList(f.statuses()))
	require.Len(t, f.alerts.all(), 1, "one alert per give-up")
}

// Hole 5: a reply without a version is read against its order's version,
// not the deployed one. An order started on v1 (three steps); v2 removes
// the last; an old agent's reply (no version, no signature) for step 1
// must lead to step 2 of v1, not "processed" after step 1.
func TestHole5AReplyWithoutAVersionKeepsTheOrdersVersion(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	v1, err := registry.Default(stepTimeout)
	require.NoError(t, err)
	f.h = schedulerHandler(f.newServiceWith("scheduler-v1", v1, sas.AgentQueues{Default: f.agentURL}))
	charge := f.runForward("o-h5", "order", 1)
	require.Equal(t, 1, charge.Step)

	v2 := v1[registry.Order]
	v2.Steps = v2.Steps[:2] // the deploy removes "ship"
	reg, err := sas.NewRegistry(v2, v1[registry.Payment])
	require.NoError(t, err)
	f.h = schedulerHandler(f.newServiceWith("scheduler-v2", reg, sas.AgentQueues{Default: f.agentURL}))

	var old sas.AgentReply
	require.NoError(t, json.Unmarshal([]byte(done(charge)), &old))
	old.Version, old.Sig, old.Generation = "", "", 0 // an agent built before these fields
	f.deliver(sas.Encode(old))

	ship := f.request()
	require.Equal(t, 2, ship.Step, "v1's third step runs")
	require.Equal(t, "ship", ship.StepName)
	require.Equal(t, v1[registry.Order].Version(), ship.Version)
	require.NotContains(t, statusList(f.statuses()), "processed#20000")
	f.deliver(done(ship))
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processed, sas.Processed}, f.states("o-h5"))
}

// ambiguousClaim commits the first compensation claim and answers as an
// SDK retry of it would: the condition failed, against the claim itself.
type ambiguousClaim struct {
	sas.StateStore
	done bool
}

func (s *ambiguousClaim) Claim(ctx context.Context, p sas.ClaimParams) (sas.StepRecord, error) {
	rec, err := s.StateStore.Claim(ctx, p)
	if err != nil || s.done || p.From == "" || p.From == sas.Pending {
		return rec, err
	}
	s.done = true
	return sas.StepRecord{}, &sas.RaceError{Op: "Claim", Key: p.Key, Current: &rec}
}

// Hole 6: a lost claim race is checked against our own claim. The
// compensation's claim commits and its retry loses to it: the undo must
// go out at once, not wait for the supervisor.
func TestHole6AnAmbiguousCommitOfTheUndoClaimSendsTheUndo(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	reg, err := registry.Default(stepTimeout)
	require.NoError(t, err)
	amb := &ambiguousClaim{StateStore: f.calls}
	svc, err := scheduler.New(scheduler.Config{
		Store: amb, Queue: f.q, Clock: f.clock, Alerter: f.alerts, Workflows: reg,
		Owner: owner, AgentQueues: sas.AgentQueues{Default: f.agentURL}, PickupTimeout: time.Minute,
		IntakeQueueURL: intakeQueueURL, ControlQueueURL: controlQueueURL, SigningKey: testKey,
		ReplyToAllowed: func(u string) bool { return u == f.replyURL },
	})
	require.NoError(t, err)
	f.h = schedulerHandler(svc)

	ship := f.runForward("o-h6", "order", 2)
	f.deliver(reply(ship, sas.OutcomeFailed, "no carrier"))
	require.True(t, amb.done, "the compensation claim was ambiguous")
	undo := f.request()
	require.True(t, undo.Compensation)
	require.Equal(t, 1, undo.Step, "the claim is ours: its undo goes out now")
	f.deliver(done(undo))
	f.deliver(done(f.request()))
	require.Equal(t, []sas.ProcessState{sas.Compensated, sas.Compensated, sas.Error}, f.states("o-h6"))
}

// resubmitAfterRead makes an operator's resubmit of step 2 land right
// after the scheduler reads the order to plan its compensation.
type resubmitAfterRead struct {
	sas.StateStore
	clock interface{ Now() time.Time }
	done  bool
}

func (s *resubmitAfterRead) GetOrder(ctx context.Context, id string) (sas.OrderView, error) {
	v, err := s.StateStore.GetOrder(ctx, id)
	if err != nil || s.done || len(v.Steps) < 3 || v.Steps[2].ProcessState != sas.Error {
		return v, err
	}
	s.done = true
	now := s.clock.Now()
	_, rerr := s.StateStore.Resubmit(ctx, sas.ResubmitParams{Key: v.Steps[2].Key(), Attempt: v.Steps[2].Attempt,
		Now: now, PickupBy: now.Add(time.Minute), Actor: "operator", Reason: "carrier back"})
	return v, rerr
}

// Simulator seed 4411: an operator resubmits a refused step (one without
// an undo) while the failure's automatic compensation is being planned
// from the order read before the resubmit. The undo's claim is fenced on
// the order's other steps as read, so it loses, the plan is made again
// from the order as it is, and nothing is undone: the resubmitted step
// runs on.
func TestAResubmitDuringTheCompensationsPlanWins(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	reg, err := registry.Default(stepTimeout)
	require.NoError(t, err)
	st := &resubmitAfterRead{StateStore: f.calls, clock: f.clock}
	svc, err := scheduler.New(scheduler.Config{
		Store: st, Queue: f.q, Clock: f.clock, Alerter: f.alerts, Workflows: reg,
		Owner: owner, AgentQueues: sas.AgentQueues{Default: f.agentURL}, PickupTimeout: time.Minute,
		IntakeQueueURL: intakeQueueURL, ControlQueueURL: controlQueueURL, SigningKey: testKey,
		ReplyToAllowed: func(u string) bool { return u == f.replyURL },
	})
	require.NoError(t, err)
	f.h = schedulerHandler(svc)

	ship := f.runForward("o-4411", "order", 2)
	f.deliver(reply(ship, sas.OutcomeFailed, "no carrier"))
	require.True(t, st.done, "the resubmit landed between the read and the claim")
	for _, r := range f.requests() {
		require.False(t, r.Compensation, "no undo goes out for an order an operator resubmitted: %+v", r)
	}
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processed, sas.Pending}, f.states("o-4411"))
	require.False(t, f.step("o-4411", 2).DueAt.IsZero(), "the resubmitted step is ready for its next attempt")
}
