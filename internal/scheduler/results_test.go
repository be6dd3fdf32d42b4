package scheduler_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
	"github.com/sas-go/sas/internal/sqslimits"
)

// doneWith is a done reply carrying result.
func doneWith(req sas.AgentRequest, result string) string {
	rep := signedReply(req, sas.OutcomeDone, "")
	rep.Result = json.RawMessage(result)
	return sas.Encode(rep)
}

// rejectedReply is a failed reply that says it is a business rejection.
func rejectedReply(req sas.AgentRequest, reason string) string {
	rep := signedReply(req, sas.OutcomeFailed, reason)
	rep.Rejected = true
	return sas.Encode(rep)
}

// Each step's result is recorded with its step; each request carries the
// results of the steps before its step; the processed status all of them.
func TestResultsFlowToTheStepsThatFollow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-res", "order", f.replyURL))
	req := f.request()
	require.Nil(t, req.Results, "the first step follows nothing")

	f.deliver(doneWith(req, `{ "reservation": "R-1" }`))
	req = f.request()
	require.Equal(t, 1, req.Step)
	require.Equal(t, sas.Results{"reserve": json.RawMessage(`{"reservation":"R-1"}`)}, req.Results, "compacted, by step name")

	f.deliver(done(req)) // charge returns nothing
	req = f.request()
	require.Equal(t, sas.Results{"reserve": json.RawMessage(`{"reservation":"R-1"}`)}, req.Results, "a step without a result has no entry")

	f.deliver(doneWith(req, `"SHIP-9"`))
	v := f.view("o-res")
	require.Equal(t, `{"reservation":"R-1"}`, string(v.Steps[0].Result))
	require.Empty(t, v.Steps[1].Result)
	require.Equal(t, `"SHIP-9"`, string(v.Steps[2].Result))
	ss := f.statuses()
	last := ss[len(ss)-1]
	require.Equal(t, sas.StatusProcessed, last.Status)
	require.Equal(t, sas.Results{"reserve": json.RawMessage(`{"reservation":"R-1"}`), "ship": json.RawMessage(`"SHIP-9"`)}, last.Results)
}

// A one-step order's processed status carries its result, and its reply
// still reads nothing.
func TestOneStepResultReadsNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-one", "payment", f.replyURL))
	req := f.request()
	f.calls.take()
	f.deliver(doneWith(req, `{"charge":"ch_1"}`))
	calls, _ := f.calls.take()
	require.Equal(t, map[string]int{"Complete": 1}, calls)
	ss := f.statuses()
	require.Equal(t, sas.Results{"charge": json.RawMessage(`{"charge":"ch_1"}`)}, ss[len(ss)-1].Results)
}

// An undo sees its own step's result (and those before it); a duplicate
// success re-sends the successor's request with the results as recorded.
func TestAnUndoSeesItsOwnResult(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-undo", "order", f.replyURL))
	first := f.request()
	f.deliver(doneWith(first, `{"reservation":"R-2"}`))
	charge := f.request()
	f.deliver(doneWith(first, `{"reservation":"R-2"}`)) // a duplicate of the first success
	again := f.request()
	require.Equal(t, charge.Step, again.Step)
	require.Equal(t, charge.Results, again.Results, "the re-sent request carries the results as recorded")

	f.deliver(doneWith(charge, `{"charge":"ch_2"}`))
	ship := f.request()
	f.deliver(reply(ship, sas.OutcomeFailed, "address unknown"))
	undo := f.request()
	require.True(t, undo.Compensation)
	require.Equal(t, "charge", undo.StepName)
	require.Equal(t, sas.Results{"reserve": json.RawMessage(`{"reservation":"R-2"}`), "charge": json.RawMessage(`{"charge":"ch_2"}`)}, undo.Results)
	f.deliver(done(undo))
	undo = f.request()
	require.Equal(t, "reserve", undo.StepName)
	require.Equal(t, sas.Results{"reserve": json.RawMessage(`{"reservation":"R-2"}`)}, undo.Results, "its own step's, and none after it")
}

// A result over the bound per step fails its step by name; its effect
// happened, so the step is undone with the order, and the operator is told.
func TestAResultTooLargeFailsItsStepAndIsUndone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-big", "order", f.replyURL))
	req := f.request()
	f.deliver(doneWith(req, `{"r":"R"}`))
	charge := f.request()
	big := `"` + strings.Repeat("x", sas.MaxResultBytes) + `"`
	f.deliver(doneWith(charge, big))

	r := f.step("o-big", 1)
	require.Equal(t, sas.Compensating, r.ProcessState, "failed, and its own undo claimed first")
	require.Contains(t, r.LastError, sas.ErrorResultTooLarge)
	require.True(t, r.UndoOwed, "its effect happened")
	require.Empty(t, r.Result, "never recorded")
	undo := f.request()
	require.True(t, undo.Compensation)
	require.Equal(t, "charge", undo.StepName, "the step that produced it is undone first")
	require.Len(t, f.alerts.all(), 1, "an operator is told: the workflow's results outgrew their bound")
	require.LessOrEqual(t, len(sas.Encode(undo)), sqslimits.MaxOrderMessageBytes)
}

// The bound per order: results that fit one by one but not together fail
// the step that brought them over.
func TestResultsOverTheOrderBoundFailTheStepThatBroughtThemOver(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	steps := make([]sas.StepDef, 6)
	for i := range steps {
		steps[i] = sas.StepDef{Name: "s" + string(rune('a'+i)), Agent: registry.PaymentsAgent, Action: "POST /x", Undo: "POST /x/undo", Timeout: stepTimeout}
	}
	reg, err := sas.NewRegistry(sas.Workflow{Name: "many", Steps: steps})
	require.NoError(t, err)
	f.svc = f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL})
	f.h = schedulerHandler(f.svc)

	f.deliver(intake("o-many", "many", f.replyURL))
	req := f.request()
	chunk := `"` + strings.Repeat("y", sas.MaxResultBytes-10) + `"`
	var failedAt int
	for i := 0; i < len(steps); i++ {
		f.deliver(doneWith(req, chunk))
		if f.step("o-many", i).ProcessState != sas.Processed {
			failedAt = i
			break
		}
		req = f.request()
		require.LessOrEqual(t, req.Results.Size(), sas.MaxOrderResultsBytes)
		require.LessOrEqual(t, len(sas.Encode(req)), sqslimits.MaxOrderMessageBytes)
	}
	require.Equal(t, 4, failedAt, "four results of ~16 KiB fit in 64 KiB with their names; a fifth does not")
	require.Contains(t, f.step("o-many", 4).LastError, "per order")
	undo := f.request()
	require.True(t, undo.Compensation)
	require.Equal(t, 4, undo.Step)
}

// A business rejection: the order is compensated as for any failure, but
// nobody is paged, the submitter hears "rejected" with the step and the
// reason once it is undone, and the order's state is Rejected.
func TestARejectionIsCompensatedWithoutAnAlert(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-rej", "order", f.replyURL))
	req := f.request()
	f.deliver(doneWith(req, `{"reservation":"R-3"}`))
	charge := f.request()
	f.deliver(rejectedReply(charge, "card declined"))
	f.deliver(rejectedReply(charge, "card declined")) // its duplicate
	r := f.step("o-rej", 1)
	require.True(t, r.Rejected)
	require.Equal(t, sas.Compensating, r.ProcessState, "undone like any refused step")
	for range 2 {
		reqs := f.requests() // the duplicate re-sent the first undo's request
		undo := reqs[len(reqs)-1]
		require.True(t, undo.Compensation)
		f.deliver(done(undo))
	}
	require.Empty(t, f.alerts.all(), "a business outcome pages nobody")
	require.Equal(t, sas.Rejected, f.view("o-rej").State())
	ss := f.statuses()
	require.Equal(t, []string{"received#1000", "step-done/reserve#3001", "rejected/charge#15000"}, statusList(ss))
	require.Equal(t, "card declined", ss[len(ss)-1].Reason)
}

// A rejection with nothing to undo ends the order at once; an operational
// failure of the same step still alerts.
func TestARejectionWithNothingToUndoEndsAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	steps := []sas.StepDef{{Name: "approve", Agent: registry.PaymentsAgent, Action: "POST /approvals", Timeout: stepTimeout}}
	reg, err := sas.NewRegistry(sas.Workflow{Name: "expense", Steps: steps})
	require.NoError(t, err)
	f.svc = f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL})
	f.h = schedulerHandler(f.svc)

	f.deliver(intake("o-exp", "expense", f.replyURL))
	f.deliver(rejectedReply(f.request(), "over budget"))
	require.Empty(t, f.alerts.all())
	require.Equal(t, sas.Rejected, f.view("o-exp").State())
	require.Equal(t, []string{"received#1000", "rejected/approve#7000"}, statusList(f.statuses()))

	f.deliver(intake("o-exp2", "expense", f.replyURL))
	f.clock.Advance(time.Second)
	f.deliver(reply(f.request(), sas.OutcomeFailed, "approvals service refused the request"))
	require.Len(t, f.alerts.all(), 1, "an operational failure still alerts")
	require.Equal(t, sas.Error, f.view("o-exp2").State())
}

// A rejection after a step with no undo: the rejected step is undone (a
// refused step may have taken effect), the step before it stays Processed
// for good, and the order ends Rejected, as the submitter hears. Read from
// its records alone, [Processed, Compensated] looked owed its first undo,
// and the scheduler posted "compensated" (the simulator's seed 12623, a
// wait step before a rejected agent-token step): the end is read with the
// definition.
func TestARejectionAfterAStepWithNoUndoEndsRejected(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	steps := []sas.StepDef{
		{Name: "notify", Agent: registry.PaymentsAgent, Action: "POST /notices", Timeout: stepTimeout},
		{Name: "approve", Agent: registry.PaymentsAgent, Action: "POST /approvals", Undo: "POST /approvals/void", Timeout: stepTimeout},
	}
	wf := sas.Workflow{Name: "expense", Steps: steps}
	reg, err := sas.NewRegistry(wf)
	require.NoError(t, err)
	f.svc = f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL})
	f.h = schedulerHandler(f.svc)

	f.deliver(intake("o-exp", "expense", f.replyURL))
	f.deliver(done(f.request()))
	f.deliver(rejectedReply(f.request(), "over budget"))
	undo := f.request()
	require.True(t, undo.Compensation)
	require.Equal(t, 1, undo.Step, "the rejected step is undone; notify has no undo")
	f.deliver(done(undo))
	require.Empty(t, f.requests())
	require.Empty(t, f.alerts.all())
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Compensated}, f.states("o-exp"))
	v := f.view("o-exp")
	v.Def = &wf // as the console and the test kit read it
	require.Equal(t, sas.Rejected, v.State())
	ss := f.statuses()
	require.Equal(t, "rejected/approve#11000", statusList(ss)[len(ss)-1])
	require.Equal(t, "over budget", ss[len(ss)-1].Reason)
}

// ordersUnreadable fails every GetOrder while down is set, as a throttled
// store does; the step writes go through.
type ordersUnreadable struct {
	sas.StateStore
	down atomic.Bool
}

func (s *ordersUnreadable) GetOrder(ctx context.Context, id string) (sas.OrderView, error) {
	if s.down.Load() {
		return sas.OrderView{}, errors.New("ThrottlingException: rate exceeded")
	}
	return s.StateStore.GetOrder(ctx, id)
}

// A request whose results cannot be read is not sent, and the message that
// claimed its attempt is left for redelivery, whose re-send sends it: the
// attempt is claimed and not started, so the supervisor would leave it
// until its request's delivery horizon (docs/protocol.md, "Deadlines start
// at pick-up"; the simulator's seed 173 stalled so).
func TestARequestWhoseResultsCannotBeReadIsSentByTheRedelivery(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	reg, err := registry.Default(stepTimeout)
	require.NoError(t, err)
	store := &ordersUnreadable{StateStore: f.calls}
	h := scheduler.NewHandler(f.newServiceConfig(owner, reg, sas.AgentQueues{Default: f.agentURL},
		func(c *scheduler.Config) { c.Store = store }))

	f.deliver(intake("o-unread", "order", f.replyURL))
	f.deliver(doneWith(f.request(), `"R-1"`))
	req := f.request()
	require.Equal(t, 1, req.Step, "the second step reads the results before it")

	store.down.Store(true)
	ev := f.event(transient(req, "", "503 from the remote"))
	require.Equal(t, []string{ev.Records[0].MessageId}, f.handleWith(h, ev), "left for redelivery")
	rec := f.step("o-unread", 1)
	require.Equal(t, sas.Processing, rec.ProcessState, "the next attempt is claimed")
	require.Equal(t, 2, rec.Attempt)
	require.True(t, rec.StartedAt.IsZero())
	f.clock.Advance(16 * time.Minute)
	require.Empty(t, f.requests(), "nothing sent without its results")

	store.down.Store(false)
	require.Empty(t, f.handleWith(h, ev), "the redelivery")
	f.clock.Advance(16 * time.Minute)
	reqs := f.requests()
	require.Len(t, reqs, 1, "sent once, by the redelivery")
	require.Equal(t, 2, reqs[0].Attempt)
	require.Equal(t, sas.Results{"reserve": json.RawMessage(`"R-1"`)}, reqs[0].Results)
	require.Equal(t, 2, f.step("o-unread", 1).Attempt, "no other attempt claimed")
}
