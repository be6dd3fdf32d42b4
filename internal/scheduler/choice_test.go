package scheduler_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/workflow"
)

// choiceTrip is a trip whose car is booked only when the payload asks for
// one, and whose insurance only when the flight's result says it is long:
// flight → car? → insurance? → pay.
func choiceTrip(t *testing.T) sas.Registry {
	t.Helper()
	d := workflow.Duration(stepTimeout)
	reg, err := registry.FromDefinitions([]workflow.Workflow{{Name: "trip", Steps: []workflow.Step{
		{Name: "flight", Agent: "travel", Action: "book-flight", Undo: "cancel-flight", Timeout: d},
		{Name: "car", Agent: "travel", Action: "book-car", Undo: "cancel-car", Timeout: d, When: "payload.needsCar"},
		{Name: "insurance", Agent: "travel", Action: "insure", Undo: "uninsure", Timeout: d, When: "results.flight.hours > 6"},
		{Name: "pay", Agent: "travel", Action: "pay", Timeout: d},
	}}})
	require.NoError(t, err)
	return reg
}

func choiceFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	f.svc = f.newServiceWith(owner, choiceTrip(t), sas.AgentQueues{Default: f.agentURL})
	f.h = schedulerHandler(f.svc)
	return f
}

func tripIntake(id, payload, replyTo string) string {
	b, _ := json.Marshal(map[string]any{"v": 1, "orderId": id, "workflow": "trip", "payload": json.RawMessage(payload), "replyTo": replyTo})
	return string(b)
}

// A false condition skips its step in the completion's own write: it is
// never called, its history and the statuses say so, and an order whose
// steps all ran or were skipped is Processed.
func TestAFalseConditionSkipsItsStep(t *testing.T) {
	t.Parallel()
	f := choiceFixture(t)
	f.deliver(tripIntake("o-skip", `{"needsCar": false}`, f.replyURL))
	flight := f.request()
	require.Equal(t, "flight", flight.StepName)
	f.calls.take()
	f.deliver(doneWith(flight, `{"hours": 9}`))
	calls, _ := f.calls.take()
	require.Equal(t, map[string]int{"Complete": 1, "GetOrder": 1}, calls, "one read for the conditions, one write that skips and claims")
	ins := f.request()
	require.Equal(t, "insurance", ins.StepName, "the car is skipped")
	require.Equal(t, sas.Results{"flight": json.RawMessage(`{"hours":9}`)}, ins.Results)

	car := f.step("o-skip", 1)
	require.Equal(t, sas.Skipped, car.ProcessState)
	require.Zero(t, car.Attempt, "never claimed")
	require.Equal(t, 1, transitions(car, sas.Skipped))
	require.Contains(t, car.LastHistoryReason(), "payload.needsCar is false")

	f.deliver(done(ins))
	f.deliver(done(f.request()))
	v := f.view("o-skip")
	require.Equal(t, sas.Processed, v.State())
	require.True(t, v.Settled())
	require.Equal(t, []string{"received#1000", "step-done/flight#3001", "step-skipped/car#5000", "step-done/insurance#7001", "step-done/pay#9001", "processed#10000"}, statusList(f.statuses()))
}

// A condition that holds runs its step; one that is false at the end skips
// the rest, and the order is processed by the completion that skipped them.
func TestTrueConditionRunsAndTrailingSkipsEndTheOrder(t *testing.T) {
	t.Parallel()
	reg, err := registry.FromDefinitions([]workflow.Workflow{{Name: "trip", Steps: []workflow.Step{
		{Name: "flight", Agent: "travel", Action: "book-flight", Undo: "cancel-flight", Timeout: workflow.Duration(stepTimeout)},
		{Name: "car", Agent: "travel", Action: "book-car", Undo: "cancel-car", Timeout: workflow.Duration(stepTimeout), When: "payload.needsCar"},
		{Name: "upgrade", Agent: "travel", Action: "upgrade", Timeout: workflow.Duration(stepTimeout), When: "payload.vip"},
	}}})
	require.NoError(t, err)
	f := newFixture(t)
	f.svc = f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL})
	f.h = schedulerHandler(f.svc)
	f.deliver(tripIntake("o-true", `{"needsCar": true, "vip": false}`, f.replyURL))
	f.deliver(done(f.request()))
	car := f.request()
	require.Equal(t, "car", car.StepName, "its condition holds: it runs")
	f.deliver(doneWith(car, `"CAR-1"`))
	require.Empty(t, f.requests(), "nothing left to run")
	v := f.view("o-true")
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processed, sas.Skipped}, f.states("o-true"))
	require.Equal(t, sas.Processed, v.State())
	ss := f.statuses()
	require.Equal(t, []string{"received#1000", "step-done/flight#3001", "step-done/car#5001", "step-skipped/upgrade#7000", "processed#8000"}, statusList(ss))
	require.Equal(t, sas.Results{"car": json.RawMessage(`"CAR-1"`)}, ss[len(ss)-1].Results)

	// A duplicate of the last success repeats the statuses, and claims nothing.
	f.deliver(doneWith(car, `"CAR-1"`))
	require.Empty(t, f.requests())
	require.Equal(t, sas.Processed, f.view("o-true").State())
}

// The first steps' conditions are decided at submission: a skipped first
// step is created Skipped and the first to run is claimed in the same write.
func TestConditionsAtSubmission(t *testing.T) {
	t.Parallel()
	reg, err := registry.FromDefinitions([]workflow.Workflow{{Name: "trip", Steps: []workflow.Step{
		{Name: "visa", Agent: "travel", Action: "visa", Timeout: workflow.Duration(stepTimeout), When: "payload.abroad"},
		{Name: "flight", Agent: "travel", Action: "book-flight", Timeout: workflow.Duration(stepTimeout)},
	}}})
	require.NoError(t, err)
	f := newFixture(t)
	f.svc = f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL})
	f.h = schedulerHandler(f.svc)
	f.calls.take()
	f.deliver(tripIntake("o-first", `{"abroad": false}`, f.replyURL))
	calls, _ := f.calls.take()
	require.Equal(t, map[string]int{"Submit": 1}, calls)
	req := f.request()
	require.Equal(t, "flight", req.StepName)
	require.Equal(t, []sas.ProcessState{sas.Skipped, sas.Processing}, f.states("o-first"))
	f.deliver(done(req))
	require.Equal(t, sas.Processed, f.view("o-first").State())

	// Every step skipped: the order is processed at submission.
	reg2, err := registry.FromDefinitions([]workflow.Workflow{{Name: "trip", Steps: []workflow.Step{
		{Name: "visa", Agent: "travel", Action: "visa", Timeout: workflow.Duration(stepTimeout), When: "payload.abroad"},
	}}})
	require.NoError(t, err)
	g := newFixture(t)
	g.svc = g.newServiceWith(owner, reg2, sas.AgentQueues{Default: g.agentURL})
	g.h = schedulerHandler(g.svc)
	g.deliver(tripIntake("o-none", `{"abroad": false}`, g.replyURL))
	require.Empty(t, g.requests())
	require.Equal(t, sas.Processed, g.view("o-none").State())
	require.Equal(t, []string{"received#1000", "step-skipped/visa#3000", "processed#4000"}, statusList(g.statuses()))
	// A redelivered intake (its first delivery may have stopped after the
	// write) tells it all again, under the same sequence numbers.
	g.deliver(tripIntake("o-none", `{"abroad": false}`, g.replyURL))
	require.ElementsMatch(t, []string{"received#1000", "step-skipped/visa#3000", "processed#4000"}, statusList(g.statuses()))
}

// A condition that cannot be evaluated is a permanent failure of its step,
// written with the completion: the step is never called and has nothing to
// undo; what ran before it is undone; the operator and the submitter are
// told why.
func TestAConditionThatCannotBeEvaluatedFailsItsStep(t *testing.T) {
	t.Parallel()
	f := choiceFixture(t)
	f.deliver(tripIntake("o-bad", `{"needsCar": true}`, f.replyURL))
	f.deliver(done(f.request()))
	car := f.request()
	f.deliver(done(car)) // the flight returned nothing: results.flight is missing
	ins := f.step("o-bad", 2)
	require.Equal(t, sas.Error, ins.ProcessState)
	require.Equal(t, sas.ByCondition, ins.FailedBy)
	require.Contains(t, ins.LastError, sas.ErrorCondition)
	require.Contains(t, ins.LastError, "results.flight.hours > 6")
	require.Zero(t, ins.Attempt, "never claimed, never called")

	undo := f.request()
	require.True(t, undo.Compensation)
	require.Equal(t, "car", undo.StepName, "newest first; the failed step has nothing to undo")
	f.deliver(done(undo))
	undo = f.request()
	require.Equal(t, "flight", undo.StepName)
	f.deliver(done(undo))
	require.Empty(t, f.requests())
	require.Equal(t, sas.Compensated, f.view("o-bad").State())
	alerts := f.alerts.all()
	require.Len(t, alerts, 1)
	require.Equal(t, "insurance", alerts[0].StepName)
	ss := statusList(f.statuses())
	require.Contains(t, ss, "failed/insurance#6000", "the failure of a step never claimed: attempt 0")
	require.Equal(t, "compensated#19000", ss[len(ss)-1])
}

// A workflow without conditions reads nothing more on a step's reply: the
// conditions cost only the workflows that have them (TestCostPerOrder holds
// the counts).
func TestNoConditionsNoRead(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-plain", "order", f.replyURL))
	req := f.request()
	f.calls.take()
	f.deliver(done(req))
	calls, _ := f.calls.take()
	require.Equal(t, map[string]int{"Complete": 1}, calls)
}

// A cancel of an order that passed over a step: the skipped step never ran
// and is never undone; the ones that ran are, newest first, and the order
// ends Cancelled with the skip kept.
func TestCancelNeverUndoesASkippedStep(t *testing.T) {
	t.Parallel()
	f := choiceFixture(t)
	f.deliver(tripIntake("o-cs", `{"needsCar": false}`, f.replyURL))
	f.deliver(doneWith(f.request(), `{"hours": 9}`))
	ins := f.request()
	require.Equal(t, "insurance", ins.StepName, "the car is skipped")

	f.operatorCancel("o-cs")
	f.deliver(done(ins)) // the insurance settles after the cancel
	for _, want := range []string{"insurance", "flight"} {
		undo := f.request()
		require.True(t, undo.Compensation)
		require.Equal(t, want, undo.StepName, "newest first, the car passed over")
		f.deliver(done(undo))
	}
	require.Empty(t, f.requests())
	v := f.view("o-cs")
	require.Equal(t, []sas.ProcessState{sas.Compensated, sas.Skipped, sas.Compensated, sas.Pending}, f.states("o-cs"))
	require.Zero(t, v.Steps[1].Attempt, "the skipped step was never claimed, not even for an undo")
	require.Equal(t, sas.Cancelled, v.State())
	ss := f.statuses()
	require.Equal(t, sas.StatusCancelled, ss[len(ss)-1].Status)
	require.Equal(t, "insurance", ss[len(ss)-1].Step)
}
