package scheduler_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
)

const (
	paymentsRepliesARN = "arn:aws:sqs:eu-west-1:123456789012:sas-payments-replies"
	shippingRepliesARN = "arn:aws:sqs:eu-west-1:123456789012:sas-shipping-replies"
)

// replyQueuesFixture runs a charge (agent payments) then a shipment (agent
// shipping), each agent with a reply queue of its own, as the construct
// deploys them (docs/trust.md, "A reply queue per agent"). Both agents'
// requests go to the fixture's one agent queue, which the test reads.
func replyQueuesFixture(t *testing.T) (*fixture, *scheduler.Handler) {
	f := newFixture(t)
	reg, err := sas.NewRegistry(sas.Workflow{Name: "ship", Steps: []sas.StepDef{
		{Name: "charge", Agent: "payments", Action: "POST /payments", Undo: "POST /refunds", Timeout: stepTimeout},
		{Name: "ship", Agent: "shipping", Action: "POST /shipments", Timeout: stepTimeout},
	}})
	require.NoError(t, err)
	base := "http://sqs.local/123456789012/"
	h := scheduler.NewHandler(f.newServiceWith(owner, reg, sas.AgentQueues{ByAgent: map[string]sas.AgentQueue{
		"payments": {URL: f.agentURL, RepliesURL: base + sas.QueueName(paymentsRepliesARN)},
		"shipping": {URL: f.agentURL, RepliesURL: base + sas.QueueName(shippingRepliesARN)},
	}}))
	return f, h
}

// TestAnAgentsReplyQueueCarriesItsOwnRepliesOnly (issue 29, F-13): a reply
// on another agent's reply queue, though signed (that agent's role stole
// the request), changes nothing; so does a requeue; the step's own agent's
// reply and requeue act as ever. The scheduler queue is not bound to an
// agent.
func TestAnAgentsReplyQueueCarriesItsOwnRepliesOnly(t *testing.T) {
	t.Parallel()
	f, h := replyQueuesFixture(t)
	f.from(h, intakeARN, intake("o-f13", "ship", f.replyURL))
	charge := f.request()
	require.Equal(t, "payments", charge.Agent)

	// The shipping agent's role answers for the charge: dropped.
	f.from(h, shippingRepliesARN, done(charge))
	require.Equal(t, sas.Processing, f.step("o-f13", 0).ProcessState, "a reply for payments on shipping's queue changes nothing")
	require.Empty(t, f.requests())

	// Its own agent's reply completes it.
	f.from(h, paymentsRepliesARN, done(charge))
	require.Equal(t, sas.Processed, f.step("o-f13", 0).ProcessState)
	ship := f.request()
	require.Equal(t, "shipping", ship.Agent)

	// A requeue of the shipment from payments' queue: dropped, nothing re-sent.
	requeue := sas.Encode(sas.Retry{V: sas.MessageVersion, Kind: sas.KindRetry, OrderID: "o-f13", Step: ship.Step,
		Attempt: ship.Attempt, Reason: "no outcome after 3 deliveries", Requeue: true, Sig: ship.Sig})
	f.from(h, paymentsRepliesARN, requeue)
	require.Empty(t, f.requests(), "a requeue for shipping on payments' queue re-sends nothing")
	// From shipping's own queue, the request goes out again.
	f.from(h, shippingRepliesARN, requeue)
	require.Len(t, f.requests(), 1)

	// The scheduler queue is any agent's, as before.
	f.from(h, schedulerARN, done(ship))
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processed}, f.states("o-f13"))
}
