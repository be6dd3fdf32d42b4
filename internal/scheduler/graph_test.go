package scheduler_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
	"github.com/sas-go/sas/workflow"
)

// tripGraph is quote, then flight, hotel and car in parallel, then pay
// once all three are done.
func tripGraph(t *testing.T) sas.Registry {
	t.Helper()
	step := func(name string, after ...string) workflow.Step {
		return workflow.Step{Name: name, Agent: "x", Action: "POST /" + name, Undo: "POST /" + name + "/cancel",
			Timeout: workflow.Duration(stepTimeout), After: after}
	}
	reg, err := registry.FromDefinitions([]workflow.Workflow{{Name: "trip", Steps: []workflow.Step{
		step("quote"), step("flight", "quote"), step("hotel", "quote"), step("car", "quote"),
		step("pay", "flight", "hotel", "car"),
	}}})
	require.NoError(t, err)
	return reg
}

// graphFixture is a fixture whose scheduler runs tripGraph.
func graphFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	f.svc = f.newServiceWith(owner, tripGraph(t), sas.AgentQueues{Default: f.agentURL})
	f.h = schedulerHandler(f.svc)
	return f
}

// byStep sorts requests by step number.
func byStep(reqs []sas.AgentRequest) map[string]sas.AgentRequest {
	out := map[string]sas.AgentRequest{}
	for _, r := range reqs {
		out[r.StepName] = r
	}
	return out
}

// Steps whose predecessors are all done start at once, claimed in the
// completion's own write; a join waits for every branch; each step sees the
// results of the steps it follows, and only those.
func TestBranchesStartAtOnceAndJoin(t *testing.T) {
	t.Parallel()
	f := graphFixture(t)
	f.deliver(intake("o-par", "trip", f.replyURL))
	quote := f.request()
	f.calls.take()
	f.deliver(doneWith(quote, `{"quote":"Q-1"}`))
	calls, next := f.calls.take()
	require.Equal(t, map[string]int{"GetOrder": 1, "Complete": 1}, calls, "one read, one write claiming three branches")
	require.Len(t, next, 1)
	require.NotNil(t, next[0])
	reqs := byStep(f.requests())
	require.Len(t, reqs, 3, "flight, hotel and car at once")
	for _, name := range []string{"flight", "hotel", "car"} {
		require.Equal(t, sas.Results{"quote": json.RawMessage(`{"quote":"Q-1"}`)}, reqs[name].Results, name)
	}

	f.deliver(doneWith(reqs["flight"], `"F-1"`))
	require.Empty(t, f.requests(), "the join waits for hotel and car")
	f.deliver(doneWith(reqs["hotel"], `"H-1"`))
	require.Empty(t, f.requests(), "the join waits for car")
	require.Equal(t, sas.Pending, f.step("o-par", 4).ProcessState)
	f.deliver(doneWith(reqs["car"], `"C-1"`))
	pay := f.request()
	require.Equal(t, "pay", pay.StepName)
	require.Equal(t, sas.Results{"quote": json.RawMessage(`{"quote":"Q-1"}`), "flight": json.RawMessage(`"F-1"`),
		"hotel": json.RawMessage(`"H-1"`), "car": json.RawMessage(`"C-1"`)}, pay.Results)

	f.deliver(done(pay))
	v := f.view("o-par")
	require.Equal(t, sas.Processed, v.State())
	require.True(t, v.Settled())
	require.Equal(t, [][]int{{}, {0}, {0}, {0}, {1, 2, 3}}, v.Order.After, "the order records its graph")
	ss := f.statuses()
	require.Equal(t, sas.StatusProcessed, ss[len(ss)-1].Status)
	require.Len(t, ss[len(ss)-1].Results, 4)
}

// A branch refused for good: nothing new starts, the branches in flight
// settle before any undo is sent, then every step that took effect, in
// every branch (the refused one included: a refusal is not proof of no
// effect), is undone, newest completion first.
func TestAFailedBranchLetsTheOthersSettleThenUndoesEveryBranch(t *testing.T) {
	t.Parallel()
	f := graphFixture(t)
	f.deliver(intake("o-fail", "trip", f.replyURL))
	f.deliver(done(f.request()))
	reqs := byStep(f.requests())

	f.clock.Advance(time.Second)
	f.deliver(reply(reqs["car"], sas.OutcomeFailed, "no cars"))
	require.Empty(t, f.requests(), "no undo while flight and hotel are in flight")
	v := f.view("o-fail")
	require.False(t, v.Settled())
	require.Equal(t, sas.Processing, v.State())

	f.clock.Advance(time.Second)
	f.deliver(done(reqs["hotel"]))
	require.Empty(t, f.requests(), "no undo while flight is in flight")
	f.clock.Advance(time.Second)
	f.deliver(done(reqs["flight"]))

	var undone []string
	for {
		rs := f.requests()
		if len(rs) == 0 {
			break
		}
		require.Len(t, rs, 1, "one undo at a time")
		require.True(t, rs[0].Compensation, rs[0].StepName)
		undone = append(undone, rs[0].StepName)
		f.deliver(done(rs[0]))
	}
	require.Equal(t, []string{"flight", "hotel", "car", "quote"}, undone, "newest completion first, every branch")
	v = f.view("o-fail")
	require.Equal(t, sas.Compensated, v.State())
	require.True(t, v.Settled())
	require.Equal(t, 0, v.Steps[4].Attempt, "pay never started")
	ss := f.statuses()
	require.Equal(t, sas.StatusCompensated, ss[len(ss)-1].Status)
}

// raceStore runs hook once, right after the first order read of a
// completion returns: another branch completes between the read and the
// write that was planned on it.
type raceStore struct {
	sas.StateStore
	once sync.Once
	hook func()
}

func (s *raceStore) GetOrder(ctx context.Context, id string) (sas.OrderView, error) {
	v, err := s.StateStore.GetOrder(ctx, id)
	s.once.Do(s.hook)
	return v, err
}

// Two branches that complete at once: each read the other in flight, so
// neither would start the join on its own read. The completion is fenced
// on the other branch as read: the second write loses, plans again, and
// starts the join, exactly once.
func TestTwoBranchesCompletingAtOnceStartTheJoinOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	step := func(name string, after ...string) workflow.Step {
		return workflow.Step{Name: name, Agent: "x", Action: "POST /" + name, Timeout: workflow.Duration(stepTimeout), After: after}
	}
	reg, err := registry.FromDefinitions([]workflow.Workflow{{Name: "fork", Steps: []workflow.Step{
		step("a"), step("b", "a"), step("c", "a"), step("d", "b", "c"),
	}}})
	require.NoError(t, err)
	f.svc = f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL})
	f.h = schedulerHandler(f.svc)
	f.deliver(intake("o-race", "fork", f.replyURL))
	f.deliver(done(f.request()))
	reqs := byStep(f.requests())

	other := f.newServiceWith("scheduler-2", reg, sas.AgentQueues{Default: f.agentURL})
	rs := &raceStore{StateStore: f.calls}
	rs.hook = func() {
		require.NoError(t, other.Reply(f.ctx, signedReply(reqs["c"], sas.OutcomeDone, "")))
	}
	racing, err := scheduler.New(scheduler.Config{
		Store: rs, Queue: f.q, Clock: f.clock, Alerter: f.alerts, Workflows: reg, Owner: "scheduler-3",
		AgentQueues: sas.AgentQueues{Default: f.agentURL}, PickupTimeout: time.Minute, IntakeQueueURL: intakeQueueURL,
		ControlQueueURL: controlQueueURL, SigningKey: testKey,
		ReplyToAllowed: func(u string) bool { return u == f.replyURL },
	})
	require.NoError(t, err)
	require.NoError(t, racing.Reply(f.ctx, signedReply(reqs["b"], sas.OutcomeDone, "")))

	d := f.requests()
	require.Len(t, d, 1, "the join starts once")
	require.Equal(t, "d", d[0].StepName)
	require.Equal(t, 1, f.step("o-race", 3).Attempt)
	f.deliver(done(d[0]))
	require.Equal(t, sas.Processed, f.view("o-race").State())
}

// The supervisor gives up on a branch whose agent went quiet while another
// branch runs: its compensate undoes nothing yet (the other branch may
// still take effect); the other branch's outcome starts the compensation,
// which undoes both branches (the given-up one may have taken effect) and
// the step before them.
func TestAGiveUpInOneBranchWaitsForTheOther(t *testing.T) {
	t.Parallel()
	f := graphFixture(t)
	f.deliver(intake("o-gu", "trip", f.replyURL))
	f.deliver(done(f.request()))
	reqs := byStep(f.requests())
	f.deliver(done(reqs["car"]))
	f.clock.Advance(leaseTime + time.Second) // past the claim's deadline: its pick-up allowance and its timeout
	gu := f.giveUp("o-gu", 1)                // flight
	f.deliver(sas.Encode(sas.Compensate{V: sas.MessageVersion, Kind: sas.KindCompensate, OrderID: "o-gu", Reason: "gave up",
		Actor: "supervisor-1", GivenUp: &sas.GivenUp{Step: gu.Step, Attempt: gu.Attempt}}))
	require.Empty(t, f.requests(), "hotel is in flight: nothing is undone yet")

	f.deliver(done(reqs["hotel"]))
	var undone []string
	for rs := f.requests(); len(rs) > 0; rs = f.requests() {
		require.Len(t, rs, 1)
		undone = append(undone, rs[0].StepName)
		f.deliver(done(rs[0]))
	}
	require.ElementsMatch(t, []string{"flight", "hotel", "car", "quote"}, undone)
	require.Equal(t, "quote", undone[3], "the step the branches follow is undone last")
	require.Equal(t, sas.Compensated, f.view("o-gu").State())
}

// Steps that follow none start with the order: the intake claims the
// first in its submission and each other one with a claim of its own. A
// refusal of one ends with the others' effects undone once they settled.
func TestStepsThatFollowNoneStartWithTheOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	step := func(name string, after ...string) workflow.Step {
		return workflow.Step{Name: name, Agent: "x", Action: "POST /" + name, Undo: "POST /" + name + "/cancel",
			Timeout: workflow.Duration(stepTimeout), After: after}
	}
	reg, err := registry.FromDefinitions([]workflow.Workflow{{Name: "trip3", Steps: []workflow.Step{
		step("flight"), step("hotel", []string{}...), step("car", []string{}...), step("pay", "flight", "hotel", "car"),
	}}})
	require.NoError(t, err)
	f.svc = f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL})
	f.h = schedulerHandler(f.svc)
	f.calls.take()
	f.deliver(intake("o-roots", "trip3", f.replyURL))
	calls, _ := f.calls.take()
	require.Equal(t, map[string]int{"Submit": 1, "Claim": 2}, calls)
	reqs := byStep(f.requests())
	require.Len(t, reqs, 3, "flight, hotel and car with the order")

	f.deliver(done(reqs["flight"]))
	f.deliver(rejectedReply(reqs["car"], "no cars left"))
	require.Empty(t, f.requests(), "hotel in flight: nothing undone yet")
	f.clock.Advance(time.Second)
	f.deliver(done(reqs["hotel"]))
	var undone []string
	for rs := f.requests(); len(rs) > 0; rs = f.requests() {
		require.Len(t, rs, 1)
		undone = append(undone, rs[0].StepName)
		f.deliver(done(rs[0]))
	}
	require.Equal(t, []string{"hotel", "car", "flight"}, undone)
	v := f.view("o-roots")
	require.Equal(t, sas.Rejected, v.State())
	require.Zero(t, v.Steps[3].Attempt, "pay never started")
	require.Empty(t, f.alerts.all(), "a rejection pages nobody")
}

// A completion that claimed three branches and could not send their
// requests fails its message; the message's redelivery sends them, the
// steps its write claimed (no pick-up reported: docs/protocol.md,
// "Deadlines start at pick-up"), and a twin of the reply (another message)
// sends nothing again.
func TestARedeliveredCompletionSendsTheBranchesItClaimed(t *testing.T) {
	t.Parallel()
	f := graphFixture(t)
	f.deliver(intake("o-rd", "trip", f.replyURL))
	quote := f.request()
	ev := f.event(done(quote))
	f.failNextSends(f.agentURL, 1)
	require.Equal(t, []string{ev.Records[0].MessageId}, f.handle(ev))
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processing, sas.Processing, sas.Processing, sas.Pending}, f.states("o-rd"))
	sent := len(f.requests())

	require.Empty(t, f.handle(ev), "the redelivery succeeds")
	reqs := byStep(f.requests())
	require.Len(t, reqs, 3, "flight, hotel and car sent again (%d went out the first time)", sent)

	f.clock.Advance(time.Second) // later than the claims (a write made now would read as this handling's own)
	require.Empty(t, f.handle(f.duplicate(done(quote))))
	require.Empty(t, f.requests(), "a twin sends nothing: the requests are in the queue")
}

// The last branch to settle after another failed starts the compensation
// in its own handling, whose first undo is its own step's (newest
// completion first). When that undo's request cannot be sent, the reply's
// redelivery sends it: nobody else would (the supervisor never re-sends a
// request that may still be queued). The simulator's seed 851.
func TestARedeliveredLastBranchSendsTheUndoItsDeliveryClaimed(t *testing.T) {
	t.Parallel()
	f := graphFixture(t)
	f.deliver(intake("o-lu", "trip", f.replyURL))
	f.deliver(done(f.request()))
	reqs := byStep(f.requests())
	f.clock.Advance(time.Second)
	f.deliver(reply(reqs["car"], sas.OutcomeFailed, "no cars"))
	f.clock.Advance(time.Second)
	f.deliver(done(reqs["flight"]))
	require.Empty(t, f.requests())

	f.clock.Advance(time.Second)
	ev := f.event(done(reqs["hotel"]))
	f.failNextSends(f.agentURL, 1)
	require.Equal(t, []string{ev.Records[0].MessageId}, f.handle(ev))
	require.Equal(t, sas.Compensating, f.step("o-lu", 2).ProcessState, "the hotel's undo claimed by the hotel's own delivery")
	require.Empty(t, f.requests())

	require.Empty(t, f.handle(ev), "the redelivery succeeds")
	undo := f.request()
	require.True(t, undo.Compensation)
	require.Equal(t, "hotel", undo.StepName)
}
