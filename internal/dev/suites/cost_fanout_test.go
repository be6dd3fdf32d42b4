package suites_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/awscount"
)

// fanOutWorkflow is one fan-out step over the payload's items, four at a
// time (docs/workflows.md, "Fan-out over a list"), beside the reference
// workflows.
func fanOutWorkflow(t *testing.T) sas.Registry {
	t.Helper()
	const timeout = 5 * time.Second
	return besideTheReference(t, timeout, sas.Workflow{Name: "fan-out", Steps: []sas.StepDef{
		{Name: "hold", Agent: registry.PaymentsAgent, Action: "POST /reservations", Timeout: timeout,
			ForEach: &sas.ForEach{Items: "payload.items", Concurrency: 4}},
	}})
}

// TestCostOfAFanOut counts what a completed fan-out over 10 elements costs,
// four at a time (docs/cost.md, "A fan-out over ten elements"; the design in
// docs/decisions.md, "Fan-out elements are records of their own"). The
// intake's handler submits the order, claims the step and starts it: it
// reads the order to evaluate the list and writes the step with its first
// window of four elements in one transaction. Each element's done reply
// reads the order (the next element's item is the list evaluated again)
// and is one transaction: the element, the step's count and, while one is
// left, the element one window on. The last one completes the step with
// the elements' results, read a page at a time.
func TestCostOfAFanOut(t *testing.T) {
	r := newCostRunOf(t, true, fanOutWorkflow(t))

	const n = 10
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"sku":"s-%d"}`, i)
	}
	before := r.counter.Snapshot()
	require.NoError(t, r.sys.Submit(r.ctx, sas.Intake{OrderID: "cost-fan-out", Workflow: "fan-out",
		Payload: []byte(`{"items":[` + strings.Join(items, ",") + `]}`)}))
	last := before
	var wru []float64 // each phase's write units
	drain := func(name string, n int) {
		r.receives[name] = 0
		r.drain(name, n)
		now := r.counter.Snapshot()
		wru = append(wru, now.Sub(last).WCU)
		last = now
	}
	drain("intake-0", 1) // the order; hold claimed and started: elements 0-3 claimed
	for _, k := range []int{4, 4, 2} {
		drain("agent-0", k)     // a window's elements
		drain("scheduler-0", k) // their replies: each claims the element one window on while one is left
	}
	d := r.counter.Snapshot().Sub(before)
	v, err := r.sys.Store.GetOrder(r.ctx, "cost-fan-out")
	require.NoError(t, err)
	require.Equal(t, sas.Processed, v.State(), "%+v", v.Steps)
	var results []json.RawMessage
	require.NoError(t, json.Unmarshal(v.Steps[0].Result, &results))
	require.Len(t, results, n, "the step's result is its elements' results")
	r.log("fan-out", perOrderOf(d, r), d)
	t.Logf("fan-out: %s", d)

	require.Equal(t, map[string]int{
		"DynamoDB.TransactWriteItems": 12, // the intake; the start with elements 0-3; each element's completion (10)
		"DynamoDB.UpdateItem":         1,  // the step completed with the list of results
		"DynamoDB.GetItem":            11, // the start's GetOrder and each completion's: the order item…
		"DynamoDB.Query":              12, // …and its steps (11); the elements' results, one page
	}, dynamoOf(d), "DynamoDB requests of a fan-out over %d elements: %s", n, d)
	// The intake's 5 WRU and the start's 14 (the step and four elements,
	// 5 items × 2, and the elements' 4 index entries); an element's
	// completion with a successor 7 (3 items × 2 + the successor's index
	// entry), without 4 (2 items × 2); the step's completion 3 (its record
	// holds the ten results: units by the KB).
	require.Equal(t, []float64{19, 0, 4 * 7, 0, 2*7 + 2*4, 0, 2*4 + 3}, wru, "write units by phase: %s", d)
	require.Equal(t, 80.0, d.WCU, "write units: %s", d)
	require.Equal(t, 24.0, d.RCU, "read units: 11 GetOrders and one page of elements: %s", d)
	// SQS: 7 receives, 7 deletes (6 of them batches), 5 SendMessage (the
	// submit and the first window's four requests, which the intake's
	// handler sends one at a time) and 5 SendMessageBatch (the agent's
	// three batches of replies, the scheduler's two of requests).
	require.Equal(t, map[string]int{
		"SQS.ReceiveMessage": 7, "SQS.DeleteMessage": 1, "SQS.DeleteMessageBatch": 6,
		"SQS.SendMessage": 5, "SQS.SendMessageBatch": 5,
	}, sqsOf(d), "SQS requests: %s", d)
	require.Equal(t, map[string]int{"intake-0": 1, "agent-0": 3, "scheduler-0": 3}, r.invocations)
	require.InDelta(t, 64.0, costPerMillion(perOrderOf(d, r)).Total(), 1e-9, "dollars per million fan-outs over ten elements")
}

// sqsOf is d's SQS requests.
func sqsOf(d awscount.Snapshot) map[string]int { return requestsOf(d, "SQS.") }
