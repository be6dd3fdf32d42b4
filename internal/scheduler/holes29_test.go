package scheduler_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// The protocol holes of issue 29 §1, each replayed as its sequence against
// the real scheduler (docs/simulation.md lists where each is held).

// notifyFixture is a fixture whose one workflow, "notify", is a single
// step with no undo: a refusal leaves it in Error for an operator, and a
// resubmit of it starts a new key generation.
func notifyFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	reg, err := sas.NewRegistry(sas.Workflow{Name: "notify", Steps: []sas.StepDef{
		{Name: "notify", Agent: "payments", Action: "POST /notifications", Timeout: stepTimeout}}})
	require.NoError(t, err)
	f.h = schedulerHandler(f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL}))
	return f
}

// resubmit is an operator's resubmit of a step in Error, as sasctl makes it.
func (f *fixture) resubmit(id string, step int) sas.StepRecord {
	f.t.Helper()
	rec := f.step(id, step)
	now := f.clock.Now()
	got, err := f.mem.Resubmit(f.ctx, sas.ResubmitParams{Key: rec.Key(), Attempt: rec.Attempt, Now: now,
		PickupBy: now.Add(time.Minute), Actor: "operator", Reason: "fixed"})
	require.NoError(f.t, err)
	return got
}

// requeueOf is an agent's hand-back of req after three deliveries without
// an outcome: signed with the request's own signature.
func requeueOf(req sas.AgentRequest) string {
	return sas.Encode(sas.Retry{V: sas.MessageVersion, Kind: sas.KindRetry, OrderID: req.OrderID, Step: req.Step,
		Attempt: req.Attempt, Reason: "no outcome after 3 deliveries", Requeue: true, Sig: req.Sig, Trace: req.Trace})
}

// N1 (F-7): a request of a resubmitted step (generation 1) handed back by
// its agent is a request the scheduler sent: it goes out again, the same
// request, rather than being dropped as forged.
func TestN1AHandedBackRequestOfANewGenerationIsSentAgain(t *testing.T) {
	t.Parallel()
	f := notifyFixture(t)
	f.deliver(intake("o-n1", "notify", ""))
	f.deliver(reply(f.request(), sas.OutcomeFailed, "card expired"))
	got := f.resubmit("o-n1", 0)
	require.Equal(t, 1, got.Generation)
	f.deliver(retryMsg("o-n1", 0, got.Attempt))
	req := f.request()
	require.Equal(t, 1, req.Generation)

	f.deliver(requeueOf(req))
	again := f.requests()
	require.Len(t, again, 1, "the handed-back request goes out again")
	require.Equal(t, req.IdempotencyKey, again[0].IdempotencyKey)
	require.Equal(t, req.Sig, again[0].Sig, "the same request, under the same signature")
	f.deliver(done(again[0]))
	require.Equal(t, []sas.ProcessState{sas.Processed}, f.states("o-n1"))
}
