package scheduler_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
)

// cooling: open, then a wait and pack in parallel branches, then ship once
// both are done (a wait step in a graph, docs/protocol.md "Wait steps").
func coolingWorkflow(t sas.Timer) sas.Workflow {
	return sas.Workflow{Name: "reminder", Steps: []sas.StepDef{
		{Name: "open", Agent: "payments", Action: "POST /open", Undo: "POST /open/cancel", Timeout: stepTimeout},
		{Name: "cool-off", Timer: &t, After: []int{0}},
		{Name: "pack", Agent: "payments", Action: "POST /pack", Undo: "POST /pack/cancel", Timeout: stepTimeout, After: []int{0}},
		{Name: "ship", Agent: "payments", Action: "POST /ship", Timeout: stepTimeout, After: []int{1, 2}},
	}}
}

// coolingFixture is timerFixture for coolingWorkflow.
func coolingFixture(t *testing.T, wait sas.Timer) (*fixture, *scheduler.Handler, string) {
	return controlFixture(t, coolingWorkflow(wait))
}

// toBranches runs a cooling order through open: the wait and pack claimed
// in one write, pack's request returned.
func (f *fixture) toBranches(h *scheduler.Handler, id string) sas.AgentRequest {
	f.t.Helper()
	f.from(h, intakeARN, reminderIntake(id, `{}`))
	f.calls.take()
	f.from(h, schedulerARN, done(f.request()))
	calls, _ := f.calls.take()
	require.Equal(f.t, map[string]int{"GetOrder": 1, "Complete": 1}, calls, "one read, one write claiming both branches")
	pack := f.request() // the wait step sends no request
	require.Equal(f.t, "pack", pack.StepName)
	require.Equal(f.t, []sas.ProcessState{sas.Processed, sas.Processing, sas.Processing, sas.Pending}, f.states(id))
	return pack
}

// A wait that is one of two branches: the join waits for it (its branch
// done first does not start ship), it ends at its due time and never
// before, fenced on that due time, and its end starts the join.
func TestAWaitInABranchHoldsItsJoin(t *testing.T) {
	t.Parallel()
	f, h, control := coolingFixture(t, sas.Timer{For: 72 * time.Hour})
	pack := f.toBranches(h, "o-gw")
	w := f.step("o-gw", 1)
	require.Equal(t, t0.Add(72*time.Hour), w.DueAt, "its due time, claimed with pack, sits in the deadline index")
	require.Empty(t, f.drain(control), "72 hours is past SQS's delay: the sweep ends it")

	f.from(h, schedulerARN, done(pack))
	require.Empty(t, f.requests(), "the join waits for the wait")
	require.Equal(t, sas.Pending, f.step("o-gw", 3).ProcessState)

	f.clock.Advance(72*time.Hour - time.Second)
	f.from(h, controlARN, retryMsg("o-gw", 1, 1))
	require.Equal(t, sas.Processing, f.step("o-gw", 1).ProcessState, "a timer never fires early, in a branch too")
	require.Empty(t, f.requests())

	f.clock.Advance(time.Second)
	f.calls.take()
	f.calls.mu.Lock()
	f.calls.elapsed = nil
	f.calls.mu.Unlock()
	f.from(h, controlARN, retryMsg("o-gw", 1, 1)) // the sweep's
	require.Equal(t, []sas.StepKey{{OrderID: "o-gw", Step: 1}}, f.calls.elapsed, "the end of the wait is fenced on its due time")
	ship := f.request()
	require.Equal(t, "ship", ship.StepName)

	// A duplicate of the end (the sweep's racing the scheduler's own) changes nothing.
	f.from(h, controlARN, retryMsg("o-gw", 1, 1))
	require.Empty(t, f.requests(), "ship's request was picked up: not re-sent")
	require.Equal(t, 1, transitions(f.view("o-gw").Steps[1], sas.Processed))

	f.from(h, schedulerARN, done(ship))
	v := f.view("o-gw")
	require.Equal(t, sas.Processed, v.State())
	require.True(t, v.Settled())
}

// A short wait in a branch ends by the scheduler's own delayed message
// before the other branch is done; that branch's completion starts the
// join.
func TestAShortWaitInABranchEndsFirst(t *testing.T) {
	t.Parallel()
	f, h, control := coolingFixture(t, sas.Timer{For: 90 * time.Second})
	pack := f.toBranches(h, "o-gs")
	require.Empty(t, f.drain(control), "not before its delay")
	f.clock.Advance(90 * time.Second)
	msgs := f.drain(control)
	require.Len(t, msgs, 1, "within SQS's delay the scheduler sends itself the wait's end")
	f.from(h, controlARN, msgs[0])
	require.Equal(t, sas.Processed, f.step("o-gs", 1).ProcessState)
	require.Empty(t, f.requests(), "the join waits for pack")

	f.from(h, schedulerARN, done(pack))
	ship := f.request()
	require.Equal(t, "ship", ship.StepName)
	f.from(h, schedulerARN, done(ship))
	require.Equal(t, sas.Processed, f.view("o-gs").State())
}

// An order with two steps that start with it (a graph's root besides the
// first), submitted to start later: neither starts before its time, not on
// a redelivery of its intake either, and within SQS's delay each starts by
// its own delayed message.
func TestAnOrderWithTwoRootsStartsBothAtItsTime(t *testing.T) {
	t.Parallel()
	f, h, control := controlFixture(t, sas.Workflow{Name: "reminder", Steps: []sas.StepDef{
		{Name: "flight", Agent: "payments", Action: "POST /flight", Timeout: stepTimeout},
		{Name: "hotel", Agent: "payments", Action: "POST /hotel", Timeout: stepTimeout, After: []int{}},
		{Name: "pay", Agent: "payments", Action: "POST /pay", Timeout: stepTimeout, After: []int{0, 1}},
	}})
	body := intakeAt("o-roots", t0.Add(10*time.Minute))
	f.from(h, intakeARN, body)
	f.from(h, intakeARN, body) // a redelivery: the first delivery may have stopped anywhere
	require.Empty(t, f.requests(), "nothing runs before its start time")
	require.Equal(t, []sas.ProcessState{sas.Pending, sas.Pending, sas.Pending}, f.states("o-roots"))
	require.Equal(t, t0.Add(10*time.Minute), f.step("o-roots", 1).DueAt, "the other root's start time in the deadline index")

	f.clock.Advance(10 * time.Minute)
	var starts []string
	for _, m := range f.drain(control) {
		var r sas.Retry
		require.NoError(t, json.Unmarshal([]byte(m), &r))
		starts = append(starts, fmt.Sprintf("%s/%d", r.OrderID, r.Step))
	}
	slices.Sort(starts)
	require.Equal(t, []string{"o-roots/0", "o-roots/1"}, slices.Compact(starts), "each root starts by its own delayed message")
	for _, m := range starts {
		step := 0
		if m == "o-roots/1" {
			step = 1
		}
		f.from(h, controlARN, retryMsg("o-roots", step, 0))
	}
	reqs := byStep(f.requests())
	require.Len(t, reqs, 2, "flight and hotel at once, at the start time")
	require.Equal(t, 1, reqs["hotel"].Attempt)
	require.Zero(t, f.step("o-roots", 1).FailureCount)
}

// A branch refused while the other waits: the wait is a step in flight,
// so nothing is undone before it ends (it is never cut short: no timer
// fires early); its end starts nothing new (ship never runs) and starts
// the compensation, which undoes pack and open, newest first.
func TestARefusedBranchLetsTheWaitEndThenUndoes(t *testing.T) {
	t.Parallel()
	f, h, _ := coolingFixture(t, sas.Timer{For: 72 * time.Hour})
	pack := f.toBranches(h, "o-gf")
	f.clock.Advance(time.Second)
	f.from(h, schedulerARN, reply(pack, sas.OutcomeFailed, "no boxes"))
	require.Empty(t, f.requests(), "the wait is in flight: nothing undone yet")
	require.Equal(t, sas.Processing, f.step("o-gf", 1).ProcessState, "the wait is not cut short")

	f.clock.Advance(72 * time.Hour)
	f.from(h, controlARN, retryMsg("o-gf", 1, 1))
	var undone []string
	for rs := f.requests(); len(rs) > 0; rs = f.requests() {
		require.Len(t, rs, 1)
		require.True(t, rs[0].Compensation, "%s: nothing runs forward after a failure", rs[0].StepName)
		undone = append(undone, rs[0].StepName)
		f.from(h, schedulerARN, done(rs[0]))
	}
	require.Equal(t, []string{"pack", "open"}, undone)
	v := f.view("o-gf")
	require.Equal(t, sas.Compensated, v.State())
	require.Zero(t, v.Steps[3].Attempt, "ship never started")
}
