package suites_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/awscount"
)

// branchesWorkflow is a two-branch order: open, then left and right at
// once, then close once both are done (docs/workflows.md, "Branches in
// parallel"), on the reference agent's actions, beside the reference
// workflows (localrun's default step timeout).
func branchesWorkflow(t *testing.T) sas.Registry {
	t.Helper()
	const timeout = 5 * time.Second
	return besideTheReference(t, timeout, sas.Workflow{Name: "branches", Steps: []sas.StepDef{
		{Name: "open", Agent: registry.PaymentsAgent, Action: "POST /reservations", Timeout: timeout},
		{Name: "left", Agent: registry.PaymentsAgent, Action: "POST /payments", Timeout: timeout, After: []int{0}},
		{Name: "right", Agent: registry.PaymentsAgent, Action: "POST /shipments", Timeout: timeout, After: []int{0}},
		{Name: "close", Agent: registry.PaymentsAgent, Action: "POST /reservations", Timeout: timeout, After: []int{1, 2}},
	}})
}

// besideTheReference is a registry of w and the reference workflows
// (with step timeout timeout).
func besideTheReference(t *testing.T, timeout time.Duration, w sas.Workflow) sas.Registry {
	t.Helper()
	r, err := registry.Default(timeout)
	require.NoError(t, err)
	all := []sas.Workflow{w}
	for _, x := range r {
		all = append(all, x)
	}
	out, err := sas.NewRegistry(all...)
	require.NoError(t, err)
	return out
}

// TestCostOfATwoBranchOrder counts what a completed two-branch order
// costs: open, then left and right at once, then close (4 steps). Every
// reply of a graph reads its order once (a consistent GetOrder: 1 GetItem
// and 1 Query); the first completion claims both branches in one
// transaction; the first branch to complete is fenced on the other (a
// ConditionCheck in its transaction); the second claims the join with it.
// The agent sends both branches' replies together, so the scheduler sees
// them in one batch, the left first.
func TestCostOfATwoBranchOrder(t *testing.T) {
	r := newCostRunOf(t, true, branchesWorkflow(t))

	before := r.counter.Snapshot()
	require.NoError(t, r.sys.Submit(r.ctx, sas.Intake{OrderID: "cost-branches", Workflow: "branches", Payload: []byte(`{"amount":10}`)}))
	drain := func(name string, n int) { // drain's bound on receives is per round here
		r.receives[name] = 0
		r.drain(name, n)
	}
	drain("intake-0", 1)
	drain("agent-0", 1)     // open
	drain("scheduler-0", 1) // open done: left and right claimed
	drain("agent-0", 2)     // left, right
	drain("scheduler-0", 2) // left done (fenced on right), right done (close claimed)
	drain("agent-0", 1)     // close
	drain("scheduler-0", 1) // close done: the order is processed
	d := r.counter.Snapshot().Sub(before)
	v, err := r.sys.Store.GetOrder(r.ctx, "cost-branches")
	require.NoError(t, err)
	require.Equal(t, sas.Processed, v.State(), "%+v", v.Steps)
	r.log("two branches", perOrderOf(d, r), d)
	t.Logf("two branches: %s", d)
	dynamo, sqs := map[string]int{}, 0
	for k, v := range d.Requests {
		if strings.HasPrefix(k, "DynamoDB.") {
			dynamo[k] = v
		} else {
			sqs += v
		}
	}
	require.Equal(t, map[string]int{
		// The intake; open's completion claiming both branches; left's,
		// fenced on right; right's, claiming close.
		"DynamoDB.TransactWriteItems": 4,
		"DynamoDB.UpdateItem":         1, // close's completion
		"DynamoDB.GetItem":            4, // each completion's GetOrder: the order item…
		"DynamoDB.Query":              7, // …and its steps (4); each transaction's records read back (3)
	}, dynamo, "DynamoDB requests of a two-branch order: %s", d)
	// Intake 5 items × 2 + 1 index entry; open's transaction 3 updates × 2;
	// left's 1 update and 1 check × 2; right's 2 updates × 2; close's
	// UpdateItem 1 + its index entry removed.
	require.Equal(t, 27.0, d.WCU, "write units: %s", d)
	require.Equal(t, 11.0, d.RCU, "read units: 4 GetOrders and 3 reads back: %s", d)
	// SQS: 7 receives, 7 deletes (2 of them batched), 5 sends alone and
	// the branches' two requests in one batch; their two replies go out
	// together or apart as the agent's linger meets them (8 or 7 sends).
	require.Contains(t, []int{21, 22}, sqs, "SQS requests: %s", d)
	require.Equal(t, map[string]int{"intake-0": 1, "agent-0": 3, "scheduler-0": 3}, r.invocations)
}

// perOrderOf is one order's snapshot as a perOrder.
func perOrderOf(d awscount.Snapshot, r *costRun) perOrder {
	invocations := 0
	for _, k := range r.invocations {
		invocations += k
	}
	p := perOrder{Requests: map[string]float64{}, WCU: d.WCU, IndexWCU: d.IndexWCU, RCU: d.RCU, Invocations: float64(invocations)}
	for k, v := range d.Requests {
		p.Requests[k] = float64(v)
	}
	return p
}
