package suites_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/awscount"
)

// agentTokenWorkflow is an order whose payment is confirmed from outside:
// pay is a callback step with an agent (docs/protocol.md, "Agent-issued
// tokens"), then ship; beside the reference workflows.
func agentTokenWorkflow(t *testing.T) sas.Registry {
	t.Helper()
	const timeout = 5 * time.Second
	return besideTheReference(t, timeout, sas.Workflow{Name: "confirmed", Steps: []sas.StepDef{
		{Name: "pay", Agent: registry.PaymentsAgent, Action: "POST /payments", Timeout: timeout, Callback: &sas.Callback{Timeout: 24 * time.Hour}},
		{Name: "ship", Agent: registry.PaymentsAgent, Action: "POST /shipments", Timeout: timeout},
	}})
}

// TestCostOfAnAgentTokenStep counts what an order with an agent-token step
// costs: an agent step's request and reply plus a callback step's
// completion. The agent's answer writes nothing; the completion (sent by
// the outside system, counted here: one SendMessage) reads the order once
// and completes the step with ship's claim in one transaction.
func TestCostOfAnAgentTokenStep(t *testing.T) {
	r := newCostRunOf(t, true, agentTokenWorkflow(t))
	var token string
	p := r.poller("agent-0")
	h := p.Handler
	p.Handler = func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		for _, m := range ev.Records {
			var req sas.AgentRequest
			if json.Unmarshal([]byte(m.Body), &req) == nil && req.Token != "" {
				token = req.Token // what the agent hands the outside system
			}
		}
		return h(ctx, ev)
	}

	before := r.counter.Snapshot()
	require.NoError(t, r.sys.Submit(r.ctx, sas.Intake{OrderID: "cost-token", Workflow: "confirmed", Payload: []byte(`{"amount":10}`)}))
	drain := func(name string, n int) {
		r.receives[name] = 0
		r.drain(name, n)
	}
	drain("intake-0", 1)    // the order, pay claimed
	drain("agent-0", 1)     // pay: the agent starts the payment
	drain("scheduler-0", 1) // its answer: nothing written, nothing sent
	require.NotEmpty(t, token)
	answered := r.counter.Snapshot().Sub(before)
	require.Equal(t, 1, answered.Requests["DynamoDB.TransactWriteItems"], "up to the agent's answer, only the intake's write: %s", answered)
	require.Len(t, dynamoOf(answered), 1, "the agent's answer reads and writes nothing: %s", answered)
	c := sas.Completion{V: sas.MessageVersion, Kind: sas.KindComplete, Token: token, Outcome: sas.OutcomeDone, Result: json.RawMessage(`{"paymentId":"p-1"}`)}
	require.NoError(t, r.sys.SendRaw(r.ctx, r.sys.Config.IntakeQueueURL, sas.OutboundMessage{ID: "c", Body: sas.Encode(c)}))
	drain("intake-0", 1)    // the completion: ship claimed
	drain("agent-0", 1)     // ship
	drain("scheduler-0", 1) // ship done: the order is processed
	d := r.counter.Snapshot().Sub(before)
	v, err := r.sys.Store.GetOrder(r.ctx, "cost-token")
	require.NoError(t, err)
	require.Equal(t, sas.Processed, v.State(), "%+v", v.Steps)
	require.JSONEq(t, `{"paymentId":"p-1"}`, string(v.Steps[0].Result), "the completion's result is the step's")
	r.log("agent token", perOrderOf(d, r), d)
	t.Logf("agent token: %s", d)
	require.Equal(t, map[string]int{
		"DynamoDB.TransactWriteItems": 2, // the intake with pay's claim; the completion with ship's claim
		"DynamoDB.GetItem":            2, // the completion's GetOrder; ship's done reading the results for the processed status
		"DynamoDB.Query":              3, // their steps, and the completion's transaction read back
		"DynamoDB.UpdateItem":         1, // ship's completion
	}, dynamoOf(d), "DynamoDB requests of an order with an agent-token step: %s", d)
	// SQS: 6 sends (the intake, pay's request, its answer, the outside
	// system's completion, ship's request, its answer), 6 receives, 6
	// deletes.
	sqs := 0
	for k, n := range d.Requests {
		if !strings.HasPrefix(k, "DynamoDB.") {
			sqs += n
		}
	}
	require.Equal(t, 18, sqs, "SQS requests: %s", d)
	require.Equal(t, map[string]int{"intake-0": 2, "agent-0": 2, "scheduler-0": 2}, r.invocations)
}

// dynamoOf is d's DynamoDB requests.
func dynamoOf(d awscount.Snapshot) map[string]int { return requestsOf(d, "DynamoDB.") }

// requestsOf is d's requests whose "Service.Operation" starts with prefix.
func requestsOf(d awscount.Snapshot, prefix string) map[string]int {
	out := map[string]int{}
	for k, n := range d.Requests {
		if strings.HasPrefix(k, prefix) {
			out[k] = n
		}
	}
	return out
}
