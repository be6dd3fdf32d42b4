package scheduler_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
)

// payment: a stock reservation, then a payment whose provider confirms by
// webhook (an agent-token step: its agent starts the payment and hands the
// provider the token), then a shipment.
func paymentWorkflow() sas.Workflow {
	return sas.Workflow{Name: "payment", Steps: []sas.StepDef{
		{Name: "reserve", Agent: "payments", Action: "POST /holds", Undo: "DELETE /holds", Timeout: stepTimeout},
		{Name: "pay", Agent: "payments", Action: "POST /payments", Undo: "POST /refunds", Timeout: stepTimeout,
			Callback: &sas.Callback{Timeout: 24 * time.Hour}, MaxFailures: 3},
		{Name: "ship", Agent: "payments", Action: "POST /shipments", Timeout: stepTimeout},
	}}
}

func agentTokenFixture(t *testing.T) (*fixture, *scheduler.Handler) {
	f := newFixture(t)
	reg, err := sas.NewRegistry(paymentWorkflow())
	require.NoError(t, err)
	h := scheduler.NewHandler(f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL}))
	return f, h
}

// payRequest runs a payment order up to its agent-token step and returns
// that step's request.
func (f *fixture) payRequest(h *scheduler.Handler, id string) sas.AgentRequest {
	f.t.Helper()
	f.from(h, intakeARN, intake(id, "payment", f.replyURL))
	f.from(h, schedulerARN, done(f.request()))
	req := f.request()
	require.Equal(f.t, "pay", req.StepName)
	require.NotEmpty(f.t, req.Token, "the agent-token step's request carries its token")
	return req
}

// The agent's done answer starts the wait and completes nothing; the
// completion with the token the request carried completes the step, its
// result the step's. The token goes to the agent alone: no waiting status
// or notification carries it.
func TestAnAgentTokenStepWaitsForItsCompletionNotItsAgent(t *testing.T) {
	t.Parallel()
	f, h := agentTokenFixture(t)
	req := f.payRequest(h, "o-pay")
	require.Equal(t, stepTimeout.Milliseconds(), req.TimeoutMs, "the agent's call is held to the step's timeout")
	r := f.step("o-pay", 1)
	require.Equal(t, t0.Add(24*time.Hour), r.DueAt, "the wait counts from the claim: its deadline is the callback's timeout")
	for _, st := range f.statuses() {
		require.Empty(t, st.Token, "no status carries the token of a step whose agent hands it on")
	}
	require.Empty(t, f.alerts.all(), "nobody is told to complete it: its agent's outside system does")
	tok, err := sas.PeekToken(req.Token)
	require.NoError(t, err)
	require.Equal(t, sas.Token{OrderID: "o-pay", Step: 1, Attempt: 1, Holder: owner, IssuedAt: t0}, tok)

	// The agent started the payment: nothing is written, nothing sent.
	f.calls.take()
	f.from(h, schedulerARN, reply(req, sas.OutcomeDone, ""))
	calls, _ := f.calls.take()
	require.Empty(t, calls, "the agent's answer costs the store nothing")
	require.Empty(t, f.requests())
	require.Equal(t, sas.Processing, f.step("o-pay", 1).ProcessState, "the agent's answer is no completion")
	f.from(h, schedulerARN, reply(req, sas.OutcomeStarted, ""))
	require.Equal(t, t0.Add(24*time.Hour), f.step("o-pay", 1).CompleteBy, "a late pick-up report moves nothing: the deadline is the wait's")

	// The provider's webhook completes it, through the intake queue.
	f.clock.Advance(3 * time.Hour)
	f.from(h, intakeARN, completion(req.Token, sas.OutcomeDone, `{"paymentId":"p-1"}`, ""))
	calls, _ = f.calls.take()
	require.Equal(t, map[string]int{"GetOrder": 1, "Complete": 1}, calls, "as any callback step's completion")
	ship := f.request()
	require.Equal(t, "ship", ship.StepName)
	require.JSONEq(t, `{"paymentId":"p-1"}`, string(ship.Results["pay"]), "the completion's result is the step's")
	require.Empty(t, ship.Token, "a step without a callback gets no token")
	v := f.view("o-pay")
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processed, sas.Processing}, f.states("o-pay"))
	require.JSONEq(t, `{"paymentId":"p-1"}`, string(v.Steps[1].Result))
}

// The outside system is fast: its completion comes before the agent's
// answer. The step completes once; the agent's later answer, done or
// failed, changes nothing.
func TestACompletionBeforeTheAgentsAnswerCompletesTheStepOnce(t *testing.T) {
	t.Parallel()
	f, h := agentTokenFixture(t)
	req := f.payRequest(h, "o-fast")
	f.from(h, intakeARN, completion(req.Token, sas.OutcomeDone, `{"paymentId":"p-2"}`, ""))
	require.Equal(t, "ship", f.request().StepName)

	for _, late := range []string{reply(req, sas.OutcomeDone, ""), reply(req, sas.OutcomeFailed, "card declined"),
		reply(req, sas.OutcomeTransient, "timed out")} {
		f.from(h, schedulerARN, late)
	}
	require.Empty(t, f.requests(), "nothing starts twice, nothing is undone")
	v := f.view("o-fast")
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processed, sas.Processing}, f.states("o-fast"))
	require.Equal(t, 1, transitions(v.Steps[1], sas.Processed))
	require.JSONEq(t, `{"paymentId":"p-2"}`, string(v.Steps[1].Result))
	require.False(t, v.Steps[1].UndoOwed)
}

// The agent fails for good: the step fails, and since the work may have
// started its undo is owed (UndoOwed, so a resubmit keeps its key) and
// runs, newest first, before the reservation's; the token then completes
// nothing.
func TestAnAgentTokenStepsAgentFailureFailsItAndItsUndoRuns(t *testing.T) {
	t.Parallel()
	f, h := agentTokenFixture(t)
	req := f.payRequest(h, "o-fail")
	f.from(h, schedulerARN, reply(req, sas.OutcomeFailed, "card declined"))
	r := f.step("o-fail", 1)
	require.Equal(t, 1, transitions(r, sas.Error), "the step failed")
	require.True(t, r.UndoOwed, "the work may have started")
	undo := f.request()
	require.True(t, undo.Compensation)
	require.Equal(t, "pay", undo.StepName, "its own undo first")
	require.Empty(t, undo.Token, "an undo carries no token")
	require.Equal(t, stepTimeout.Milliseconds(), undo.TimeoutMs)
	require.Equal(t, t0.Add(pickupTimeout+stepTimeout), f.step("o-fail", 1).CompleteBy, "an undo's lease is an agent call's")

	f.from(h, intakeARN, completion(req.Token, sas.OutcomeDone, `{"paymentId":"late"}`, ""))
	require.Equal(t, sas.Compensating, f.step("o-fail", 1).ProcessState, "the token completes nothing now")
	require.Empty(t, f.requests())

	f.from(h, schedulerARN, done(undo))
	undo = f.request()
	require.Equal(t, "reserve", undo.StepName)
	f.from(h, schedulerARN, done(undo))
	require.Equal(t, []sas.ProcessState{sas.Compensated, sas.Compensated, sas.Pending}, f.states("o-fail"))
}

// The agent's call fails transiently: the next attempt is claimed with a
// new token (the attempt moved on). The earlier attempt's token then
// completes nothing; the new one does.
func TestAnAgentTokenStepRetriesWithANewToken(t *testing.T) {
	t.Parallel()
	f, h := agentTokenFixture(t)
	first := f.payRequest(h, "o-retry")
	f.from(h, schedulerARN, reply(first, sas.OutcomeTransient, "provider timed out"))
	f.clock.Advance(time.Hour) // past the retry interval
	second := f.request()
	require.Equal(t, 2, second.Attempt)
	require.NotEmpty(t, second.Token)
	require.NotEqual(t, first.Token, second.Token)
	r := f.step("o-retry", 1)
	require.Equal(t, r.CompleteBy, second.CompleteBy)
	wait := second.CompleteBy.Sub(r.ClaimedAt()) - 24*time.Hour
	require.True(t, wait > 0 && wait <= 15*time.Minute, "the retry's wait counts from the end of its retry interval (%s)", wait)

	f.from(h, intakeARN, completion(first.Token, sas.OutcomeDone, `{"paymentId":"old"}`, ""))
	require.Equal(t, sas.Processing, f.step("o-retry", 1).ProcessState, "a token of an earlier attempt completes nothing")
	require.Empty(t, f.requests())

	f.from(h, schedulerARN, done(second))
	f.from(h, intakeARN, completion(second.Token, sas.OutcomeDone, `{"paymentId":"new"}`, ""))
	require.Equal(t, "ship", f.request().StepName)
	require.JSONEq(t, `{"paymentId":"new"}`, string(f.step("o-retry", 1).Result))
}

// A step after it fails: the agent-token step's undo sees the result its
// completion gave, like any step's undo; an operator may complete it by
// name, as any callback step.
func TestAnAgentTokenStepsUndoSeesItsCompletionsResult(t *testing.T) {
	t.Parallel()
	f, h := agentTokenFixture(t)
	f.payRequest(h, "o-undo")
	w := sas.WaitingStepOf(f.step("o-undo", 1))
	m := sas.Completion{V: 1, Kind: sas.KindComplete, Step: &w, Outcome: sas.OutcomeDone, Result: json.RawMessage(`{"paymentId":"p-9"}`), Actor: "console:alice"}
	f.from(h, intakeARN, sas.Encode(m))
	require.Equal(t, sas.Processing, f.step("o-undo", 1).ProcessState, "a named completion from the intake queue does nothing")
	f.from(h, controlARN, sas.Encode(m))
	ship := f.request()
	f.from(h, schedulerARN, reply(ship, sas.OutcomeFailed, "no courier"))
	undo := f.request()
	require.Equal(t, "pay", undo.StepName)
	require.True(t, undo.Compensation)
	require.JSONEq(t, `{"paymentId":"p-9"}`, string(undo.Results["pay"]), "the undo sees the step's result")
}

// A failure from outside claims the step's own undo in its handling; when
// that handling stops before the undo's request goes out, the failure's
// redelivery sends it (found by the simulator, seed 2044: the late
// completion path sent nothing, and the supervisor never re-sends a
// request that may still be queued). A twin of the failure sends nothing.
func TestAFailureFromOutsideRedeliveredSendsTheUndoItClaimed(t *testing.T) {
	t.Parallel()
	f, h := agentTokenFixture(t)
	req := f.payRequest(h, "o-redo")
	fail := completion(req.Token, sas.OutcomeFailed, "", "card declined")
	ev := f.event(fail)
	ev.Records[0].EventSourceARN = intakeARN
	f.failNextSends(f.agentURL, 1)
	require.Len(t, f.handleWith(h, ev), 1, "the undo's send failed: the failure is redelivered")
	require.Equal(t, sas.Compensating, f.step("o-redo", 1).ProcessState, "its undo claimed")
	require.Empty(t, f.requests())

	f.clock.Advance(time.Second)
	f.from(h, intakeARN, completion(req.Token, sas.OutcomeFailed, "", "declined again"))
	require.Empty(t, f.requests(), "another message sends nothing")

	require.Empty(t, f.handleWith(h, ev), "the redelivery")
	undo := f.request()
	require.True(t, undo.Compensation)
	require.Equal(t, 1, undo.Step)
	require.Equal(t, 2, undo.Attempt, "the undo the first delivery claimed")
}

// A cancel lands while the agent-token step is in flight: the step settles
// by its completion, which claims the step's own undo (cancelledDone); when
// that handling stops before the undo's request goes out, the completion's
// redelivery sends it (the simulator's seed 3651).
func TestACancelledAgentTokenStepsCompletionRedeliveredSendsItsUndo(t *testing.T) {
	t.Parallel()
	f, h := agentTokenFixture(t)
	req := f.payRequest(h, "o-cx")
	f.from(h, intakeARN, sas.Encode(sas.Cancel{V: sas.MessageVersion, Kind: sas.KindCancel, OrderID: "o-cx", Reason: "changed my mind"}))
	require.True(t, f.step("o-cx", 1).Cancelled, "marked, let to settle")
	require.Equal(t, sas.Processing, f.step("o-cx", 1).ProcessState)
	require.Empty(t, f.requests())

	ev := f.event(completion(req.Token, sas.OutcomeDone, `{"paymentId":"p-x"}`, ""))
	ev.Records[0].EventSourceARN = intakeARN
	f.failNextSends(f.agentURL, 1)
	require.Len(t, f.handleWith(h, ev), 1, "the undo's send failed: the completion is redelivered")
	require.Equal(t, sas.Compensating, f.step("o-cx", 1).ProcessState, "settled, and its own undo claimed")
	require.Empty(t, f.requests())

	f.clock.Advance(time.Second)
	require.Empty(t, f.handleWith(h, ev), "the redelivery")
	undo := f.request()
	require.True(t, undo.Compensation)
	require.Equal(t, 1, undo.Step)
	require.Equal(t, 2, undo.Attempt)
}
