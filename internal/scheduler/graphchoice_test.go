package scheduler_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
	"github.com/sas-go/sas/workflow"
)

// Choices in branches (docs/workflows.md, "Choices in branches"): a step of
// a graph with a condition is judged when it becomes ready; a skipped step
// counts as settled for the steps after it, contributes no result, and is
// never undone.

// choiceGraph is quote, then flight (if asked for), hotel and car (if asked
// for) at once, car insurance after the car, then pay once flight, hotel
// and insurance are settled. The insurance's condition reads the car's
// result (cond, when set).
func choiceGraph(t *testing.T, insurance string) *fixture {
	t.Helper()
	step := func(name, when string, after ...string) workflow.Step {
		return workflow.Step{Name: name, Agent: "x", Action: "POST /" + name, Undo: "POST /" + name + "/cancel",
			Timeout: workflow.Duration(stepTimeout), After: after, When: when}
	}
	reg, err := registry.FromDefinitions([]workflow.Workflow{{Name: "trip", Steps: []workflow.Step{
		step("quote", ""), step("flight", "payload.flight", "quote"), step("hotel", "", "quote"), step("car", "payload.car", "quote"),
		step("insurance", insurance, "car"), step("pay", "", "flight", "hotel", "insurance"),
	}}})
	require.NoError(t, err)
	f := newFixture(t)
	f.svc = f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL})
	f.h = schedulerHandler(f.svc)
	return f
}

// A false condition in a branch skips its step in the write of the
// completion that made it ready; the steps after it become ready as if it
// had completed (claimed in that same write), and see no result of it; the
// join counts it as settled.
func TestAConditionInABranchSkipsItAndTheJoinCountsItSettled(t *testing.T) {
	t.Parallel()
	f := choiceGraph(t, "")
	f.deliver(tripIntake("o-gs", `{"flight": true, "car": false}`, f.replyURL))
	quote := f.request()
	f.calls.take()
	f.deliver(doneWith(quote, `"Q-1"`))
	calls, _ := f.calls.take()
	require.Equal(t, map[string]int{"GetOrder": 1, "Complete": 1}, calls, "one read, one write that skips the car and claims the rest")
	reqs := byStep(f.requests())
	require.Len(t, reqs, 3, "flight, hotel, and the insurance after the skipped car")
	require.Contains(t, reqs, "insurance")
	require.Equal(t, sas.Results{"quote": json.RawMessage(`"Q-1"`)}, reqs["insurance"].Results, "a skipped step contributes no result")

	car := f.step("o-gs", 3)
	require.Equal(t, sas.Skipped, car.ProcessState)
	require.Zero(t, car.Attempt, "never claimed")
	require.Contains(t, car.LastHistoryReason(), "payload.car is false")

	f.deliver(doneWith(reqs["flight"], `"F-1"`))
	f.deliver(doneWith(reqs["hotel"], `"H-1"`))
	require.Empty(t, f.requests(), "the join waits for the insurance")
	f.deliver(doneWith(reqs["insurance"], `"I-1"`))
	pay := f.request()
	require.Equal(t, "pay", pay.StepName)
	require.Equal(t, sas.Results{"quote": json.RawMessage(`"Q-1"`), "flight": json.RawMessage(`"F-1"`),
		"hotel": json.RawMessage(`"H-1"`), "insurance": json.RawMessage(`"I-1"`)}, pay.Results)
	f.deliver(done(pay))
	v := f.view("o-gs")
	require.Equal(t, sas.Processed, v.State())
	require.True(t, v.Settled())
	ss := statusList(f.statuses())
	require.Contains(t, ss, "step-skipped/car#9000")
	require.Equal(t, "processed#14000", ss[len(ss)-1])
}

// A skipped step passed over by a join whose every branch was skipped: the
// steps skipped in one write chain (car, then its insurance by its own
// condition), and the completion that skips the last branch starts the
// join.
func TestSkipsChainInOneWriteAndStartTheJoin(t *testing.T) {
	t.Parallel()
	f := choiceGraph(t, "has(results.car)")
	f.deliver(tripIntake("o-chain", `{"flight": false, "car": false}`, f.replyURL))
	f.deliver(done(f.request()))
	reqs := byStep(f.requests())
	require.Len(t, reqs, 1, "only the hotel runs")
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Skipped, sas.Processing, sas.Skipped, sas.Skipped, sas.Pending}, f.states("o-chain"))
	f.deliver(done(reqs["hotel"]))
	pay := f.request()
	require.Equal(t, "pay", pay.StepName, "every other branch was skipped: the hotel's completion starts the join")
	f.deliver(done(pay))
	require.Equal(t, sas.Processed, f.view("o-chain").State())

	// A duplicate of the quote's success repeats its statuses and claims
	// nothing (its skips are in the records).
	f.deliver(done(reqs["hotel"]))
	require.Empty(t, f.requests())
}

// A branch that fails for good after another was skipped: the branches in
// flight settle, then every step that took effect is undone, newest
// first; the skipped step is never undone (it never ran).
func TestASkippedBranchIsNeverUndone(t *testing.T) {
	t.Parallel()
	f := choiceGraph(t, "")
	f.deliver(tripIntake("o-gu", `{"flight": false, "car": true}`, f.replyURL))
	f.deliver(done(f.request()))
	reqs := byStep(f.requests())
	require.Len(t, reqs, 2, "hotel and car; the flight skipped")
	f.clock.Advance(time.Second)
	f.deliver(done(reqs["car"]))
	ins := f.request()
	require.Equal(t, "insurance", ins.StepName)
	f.clock.Advance(time.Second)
	f.deliver(reply(reqs["hotel"], sas.OutcomeFailed, "no rooms"))
	require.Empty(t, f.requests(), "the insurance is in flight: nothing is undone yet")
	f.clock.Advance(time.Second)
	f.deliver(done(ins))
	var undone []string
	for rs := f.requests(); len(rs) > 0; rs = f.requests() {
		require.Len(t, rs, 1)
		require.True(t, rs[0].Compensation)
		undone = append(undone, rs[0].StepName)
		f.deliver(done(rs[0]))
	}
	require.Equal(t, []string{"insurance", "hotel", "car", "quote"}, undone, "newest completion first; the skipped flight is not undone")
	v := f.view("o-gu")
	require.Equal(t, sas.Compensated, v.State())
	require.Equal(t, sas.Skipped, v.Steps[1].ProcessState)
	require.Zero(t, v.Steps[5].Attempt, "pay never started")
}

// A condition in a branch that cannot be evaluated fails its step when it
// becomes ready: its alert and failed status go out at once, nothing new
// starts, the branches in flight settle, and then everything that took
// effect is undone (the failed step has nothing to undo).
func TestAConditionFailingInABranchWaitsForTheOthersThenUndoes(t *testing.T) {
	t.Parallel()
	f := choiceGraph(t, "results.car.insured")
	f.deliver(tripIntake("o-cf", `{"flight": true, "car": true}`, f.replyURL))
	f.deliver(done(f.request()))
	reqs := byStep(f.requests())
	require.Len(t, reqs, 3)
	f.clock.Advance(time.Second)
	f.deliver(doneWith(reqs["car"], `{}`)) // no "insured": the insurance's condition cannot be evaluated
	ins := f.step("o-cf", 4)
	require.Equal(t, sas.Error, ins.ProcessState)
	require.Equal(t, sas.ByCondition, ins.FailedBy)
	require.Zero(t, ins.Attempt)
	require.Len(t, f.alerts.all(), 1, "told at once")
	require.Contains(t, statusList(f.statuses()), "failed/insurance#10000")
	require.Empty(t, f.requests(), "flight and hotel in flight: nothing undone, nothing started")

	f.clock.Advance(time.Second)
	f.deliver(done(reqs["flight"]))
	require.Empty(t, f.requests(), "the hotel in flight")
	f.clock.Advance(time.Second)
	f.deliver(done(reqs["hotel"]))
	var undone []string
	for rs := f.requests(); len(rs) > 0; rs = f.requests() {
		require.Len(t, rs, 1)
		undone = append(undone, rs[0].StepName)
		f.deliver(done(rs[0]))
	}
	require.Equal(t, []string{"hotel", "flight", "car", "quote"}, undone)
	v := f.view("o-cf")
	require.Equal(t, sas.Compensated, v.State())
	require.Zero(t, v.Steps[5].Attempt, "pay never started")
	ids := map[string]bool{}
	for _, a := range f.alerts.all() {
		ids[a.ID] = true
	}
	require.Equal(t, map[string]bool{"o-cf/4/Error/0": true}, ids, "one alert, under one id (told at the failure, again before the first undo's claim)")
}

// An operator's resubmit of a step failed by its condition runs it; its
// completion then starts what the failure held back (the steps made ready
// while the order was failing), not only its own successors.
func TestAResubmitAfterAConditionFailureStartsWhatWasHeldBack(t *testing.T) {
	t.Parallel()
	step := func(name, when string, after ...string) workflow.Step {
		return workflow.Step{Name: name, Agent: "x", Action: "POST /" + name, Timeout: workflow.Duration(stepTimeout), After: after, When: when}
	}
	reg, err := registry.FromDefinitions([]workflow.Workflow{{Name: "fork", Steps: []workflow.Step{
		step("a", ""), step("b", "payload.missing.field", "a"), step("c", "", "a"), step("d", "", "b", "c"),
	}}})
	require.NoError(t, err)
	f := newFixture(t)
	f.svc = f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL})
	f.h = schedulerHandler(f.svc)
	f.deliver(intake("o-rs", "fork", f.replyURL))
	f.deliver(done(f.request()))
	require.Empty(t, f.requests(), "b failed by its condition: c is not started either")
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Error, sas.Pending, sas.Pending}, f.states("o-rs"))

	got := f.resubmit("o-rs", 1)
	f.deliver(retryMsg("o-rs", 1, got.Attempt))
	b := f.request()
	require.Equal(t, "b", b.StepName, "the operator's word runs it")
	f.deliver(done(b))
	c := f.request()
	require.Equal(t, "c", c.StepName, "ready since a completed, started by b's completion")
	f.deliver(done(c))
	d := f.request()
	require.Equal(t, "d", d.StepName)
	f.deliver(done(d))
	require.Equal(t, sas.Processed, f.view("o-rs").State())
}

// Callback steps in branches: a callback step's completion from outside
// goes through the graph's completion like an agent's reply, so it joins
// as any branch does.

// approvalGraph is a charge, then a person's approval (a callback step)
// and a stock reservation at once, then a shipment once both are done.
func approvalGraph(t *testing.T) (*fixture, sas.Registry) {
	t.Helper()
	reg, err := sas.NewRegistry(sas.Workflow{Name: "approval", Steps: []sas.StepDef{
		{Name: "charge", Agent: "payments", Action: "POST /payments", Undo: "POST /refunds", Timeout: stepTimeout},
		{Name: "approve", Callback: &sas.Callback{Timeout: 72 * time.Hour}, After: []int{0}},
		{Name: "reserve", Agent: "stock", Action: "POST /reservations", Undo: "POST /releases", Timeout: stepTimeout, After: []int{0}},
		{Name: "ship", Agent: "stock", Action: "POST /shipments", Timeout: stepTimeout, After: []int{1, 2}},
	}})
	require.NoError(t, err)
	return newFixture(t), reg
}

// token is the token the order's waiting status handed out.
func (f *fixture) token(id string) string {
	f.t.Helper()
	for _, st := range f.statuses() {
		if st.Status == sas.StatusWaiting && st.Token != "" {
			return st.Token
		}
	}
	f.t.Fatalf("no waiting status for %s", id)
	return ""
}

// The approval and the reservation run at once; the approval, completed
// from outside while the reservation runs, does not pass the join; the
// reservation's completion then starts the shipment, which sees both
// results.
func TestACallbackStepInABranchJoinsLikeAnyBranch(t *testing.T) {
	t.Parallel()
	f, reg := approvalGraph(t)
	h := scheduler.NewHandler(f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL}))
	f.from(h, intakeARN, intake("o-cbg", "approval", f.replyURL))
	f.from(h, schedulerARN, done(f.request()))
	reqs := f.requests()
	require.Len(t, reqs, 1, "the reservation's request; the approval waits for its token")
	require.Equal(t, "reserve", reqs[0].StepName)
	require.Equal(t, sas.Processing, f.step("o-cbg", 1).ProcessState)
	tok := f.token("o-cbg")

	f.from(h, intakeARN, completion(tok, sas.OutcomeDone, `{"by":"alice"}`, ""))
	require.Empty(t, f.requests(), "the join waits for the reservation")
	require.Equal(t, sas.Processed, f.step("o-cbg", 1).ProcessState)
	require.Equal(t, sas.Pending, f.step("o-cbg", 3).ProcessState)

	f.from(h, schedulerARN, doneWith(reqs[0], `"R-1"`))
	ship := f.request()
	require.Equal(t, "ship", ship.StepName)
	require.JSONEq(t, `{"by":"alice"}`, string(ship.Results["approve"]))
	require.JSONEq(t, `"R-1"`, string(ship.Results["reserve"]))
	f.from(h, schedulerARN, done(ship))
	require.Equal(t, sas.Processed, f.view("o-cbg").State())
}

// The approval from outside and the reservation's reply at once: the
// completion from outside read the reservation in flight, and its write is
// fenced on it, so it loses, plans again and starts the shipment, once.
func TestACallbackCompletionRacingABranchStartsTheJoinOnce(t *testing.T) {
	t.Parallel()
	f, reg := approvalGraph(t)
	h := scheduler.NewHandler(f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL}))
	f.from(h, intakeARN, intake("o-cbr", "approval", f.replyURL))
	f.from(h, schedulerARN, done(f.request()))
	reserve := f.request()
	tok := f.token("o-cbr")

	other := f.newServiceWith("scheduler-2", reg, sas.AgentQueues{Default: f.agentURL})
	rs := &raceStore{StateStore: f.calls}
	rs.hook = func() {
		require.NoError(t, other.Reply(f.ctx, signedReply(reserve, sas.OutcomeDone, "")))
	}
	racing := f.newServiceConfig("scheduler-3", reg, sas.AgentQueues{Default: f.agentURL}, func(c *scheduler.Config) { c.Store = rs })
	f.from(scheduler.NewHandler(racing), intakeARN, completion(tok, sas.OutcomeDone, `{"by":"alice"}`, ""))

	d := f.requests()
	require.Len(t, d, 1, "the join starts once")
	require.Equal(t, "ship", d[0].StepName)
	require.Equal(t, 1, f.step("o-cbr", 3).Attempt)
	require.JSONEq(t, `{"by":"alice"}`, string(d[0].Results["approve"]))
}

// A branch refused while the approval waits: nothing is undone while the
// approval may still come (its outcome is not known); once it comes, the
// compensation undoes the reservation and the charge (the approval has no
// undo).
func TestARefusedBranchWaitsForTheCallbackStepToSettle(t *testing.T) {
	t.Parallel()
	f, reg := approvalGraph(t)
	h := scheduler.NewHandler(f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL}))
	f.from(h, intakeARN, intake("o-cbf", "approval", f.replyURL))
	f.from(h, schedulerARN, done(f.request()))
	reserve := f.request()
	tok := f.token("o-cbf")
	f.clock.Advance(time.Second)
	f.from(h, schedulerARN, reply(reserve, sas.OutcomeFailed, "out of stock"))
	require.Empty(t, f.requests(), "the approval waits: nothing undone yet")

	f.clock.Advance(time.Hour)
	f.from(h, intakeARN, completion(tok, sas.OutcomeDone, "", ""))
	var undone []string
	for rs := f.requests(); len(rs) > 0; rs = f.requests() {
		require.Len(t, rs, 1)
		require.True(t, rs[0].Compensation)
		undone = append(undone, rs[0].StepName)
		f.from(h, schedulerARN, done(rs[0]))
	}
	require.Equal(t, []string{"reserve", "charge"}, undone)
	require.Equal(t, sas.Compensated, f.view("o-cbf").State())
}
