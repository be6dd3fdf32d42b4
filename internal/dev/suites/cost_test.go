package suites_test

import (
	"github.com/sas-go/sas/internal/dev/poller"

	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	sdk "github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/alerts"
	"github.com/sas-go/sas/internal/assembly"
	"github.com/sas-go/sas/internal/builtinagent"
	"github.com/sas-go/sas/internal/dev/localrun"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/supervisor"
	"github.com/sas-go/sas/internal/testkit/awscount"
	"github.com/sas-go/sas/internal/testkit/emulator"
)

// AWS list prices (us-east-1, on-demand), in dollars per million units. The
// README's "Cost per order" table is computed from the same figures.
const (
	sqsPerMillionRequests       = 0.40  // standard queue, per request (each 64 KB chunk)
	dynamoPerMillionWriteUnits  = 0.625 // on-demand write request units
	dynamoPerMillionReadUnits   = 0.125 // on-demand read request units
	lambdaPerMillionInvocations = 0.20
	// Step Functions Standard: $0.025 per 1,000 state transitions.
	stepFunctionsPerMillionTransitions = 25.0
	// A single-step order as a Standard state machine: record the order,
	// call the agent and wait for its task token, check the outcome, succeed.
	stepFunctionsTransitionsPerOrder = 4
	// The budget: at most $5 per million single-step orders, 20× cheaper
	// than Step Functions Standard's $100 for the same order.
	budgetPerMillionOrders = 5.0
)

// perOrder is what one order costs in billable units: AWS requests by
// "Service.Operation", DynamoDB write and read units (as AWS prices them),
// and Lambda invocations.
type perOrder struct {
	Requests map[string]float64
	WCU      float64
	IndexWCU float64 // of which on the deadline index
	// TxIndexWCU is the index share written inside TransactWriteItems: the
	// part AWS may or may not bill double (not clearly documented).
	TxIndexWCU  float64
	RCU         float64
	Invocations float64
}

func (p perOrder) total(service string) float64 {
	n := 0.0
	for k, v := range p.Requests {
		if strings.HasPrefix(k, service+".") {
			n += v
		}
	}
	return n
}

// dollars is a cost per million orders, by service.
type dollars struct{ SQS, DynamoDB, Lambda float64 }

func (d dollars) Total() float64 { return d.SQS + d.DynamoDB + d.Lambda }

// costPerMillion prices one order's units at list price, for a million
// orders. DynamoDB on-demand bills units, not requests; SQS bills requests;
// Lambda bills invocations (duration is left out: see the README).
func costPerMillion(p perOrder) dollars {
	return dollars{
		SQS:      p.total("SQS") * sqsPerMillionRequests,
		DynamoDB: p.WCU*dynamoPerMillionWriteUnits + p.RCU*dynamoPerMillionReadUnits,
		Lambda:   p.Invocations * lambdaPerMillionInvocations,
	}
}

func TestCostPerMillionArithmetic(t *testing.T) {
	t.Parallel()
	// The unbatched single-step order of the README's table, by hand.
	p := perOrder{
		Requests:    map[string]float64{"SQS.SendMessage": 3, "SQS.ReceiveMessage": 3, "SQS.DeleteMessage": 3, "DynamoDB.TransactWriteItems": 1, "DynamoDB.UpdateItem": 1},
		WCU:         7,
		Invocations: 3,
	}
	c := costPerMillion(p)
	require.InDelta(t, 3.60, c.SQS, 1e-9)
	require.InDelta(t, 4.375, c.DynamoDB, 1e-9)
	require.InDelta(t, 0.60, c.Lambda, 1e-9)
	require.InDelta(t, 8.575, c.Total(), 1e-9)
	require.InDelta(t, 100.0, stepFunctionsPerMillionTransitions*stepFunctionsTransitionsPerOrder, 1e-9)
	require.InDelta(t, 20.0, stepFunctionsPerMillionTransitions*stepFunctionsTransitionsPerOrder/budgetPerMillionOrders, 1e-9)
}

// costRun is a System with every AWS request counted and every handler
// invocation counted, driven by hand.
type costRun struct {
	t       *testing.T
	ctx     context.Context
	sys     *localrun.System
	counter *awscount.Counter
	// invocations and receives per poller, counted in the test.
	invocations map[string]int
	receives    map[string]int
}

// newCostRun starts a System to drive by hand. batched: the agent waits as
// long as it takes for all the replies of a batch to be ready and sends them
// together (the default linger of 50 ms does the same unless a call of the
// batch ends more than 50 ms after the first, which a loaded test machine
// could make happen and the count would then not be exact).
func newCostRun(t *testing.T, batched bool) *costRun { return newCostRunOf(t, batched, nil) }

// newCostRunOf is newCostRun running the workflows of reg (nil: the
// reference ones).
func newCostRunOf(t *testing.T, batched bool, reg sas.Registry) *costRun {
	t.Helper()
	emulator.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	// IdxPK and IdxSK put a state record in the deadline index: the counter
	// needs them to price a transactional put's index write.
	counter := awscount.New("IdxPK", "IdxSK")
	// One instance per actor: three pollers, driven by hand, never Run.
	sys, err := localrun.Start(ctx, localrun.Options{Counter: counter, Instances: 1, BatchSize: 10, Workflows: reg})
	require.NoError(t, err)
	t.Cleanup(sys.Close)
	r := &costRun{t: t, ctx: ctx, sys: sys, counter: counter, invocations: map[string]int{}, receives: map[string]int{}}
	if batched {
		client, err := sdk.NewHTTPClient(sdk.HTTPConfig{AttemptTimeout: time.Second, Backoff: 50 * time.Millisecond, MaxBackoff: time.Second})
		require.NoError(t, err)
		built := assembly.System{Config: sys.Config, Parts: assembly.Parts{Queue: sys.Queue, Logger: sys.Opts.Logger, Workflows: sys.Registry}}
		ag, err := built.BuiltinAgent(builtinagent.Deps{Client: client, AllowHTTP: true}, assembly.Hosting{ReplyLinger: time.Minute})
		require.NoError(t, err)
		r.poller("agent-0").Handler = ag.Handle
	}
	for _, p := range sys.Pollers {
		h, name := p.Handler, p.Name
		p.Handler = func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			r.invocations[name]++ // one Lambda invocation per handler call
			return h(ctx, ev)
		}
	}
	return r
}

func (r *costRun) poller(name string) *poller.Poller {
	for _, p := range r.sys.Pollers {
		if p.Name == name {
			return p
		}
	}
	r.t.Fatalf("no poller %s", name)
	return nil
}

// drain polls one queue until its n messages are handled. It never polls an
// empty queue: an empty (long) poll is idle cost, paid per poller per
// second whatever the traffic, not per order.
func (r *costRun) drain(name string, n int) {
	r.t.Helper()
	p := r.poller(name)
	for handled := 0; handled < n; {
		require.Less(r.t, r.receives[name], n, "poller %s: %d receives for %d messages", name, r.receives[name], n)
		k, err := p.PollOnce(r.ctx)
		r.receives[name]++
		require.NoError(r.t, err)
		require.Positive(r.t, k, "poller %s: an empty receive with %d of %d messages handled", name, handled, n)
		handled += k
	}
	st := p.Stats()
	require.Zero(r.t, st.Failed+st.HandlerErrors, "poller %s: failed messages %+v", name, st)
}

// order runs n single-step orders from the submitter's send to the
// scheduler's completion, returning the counts per order.
func (r *costRun) order(n int) (perOrder, awscount.Snapshot) {
	return r.orderWith(n, nil)
}

// orderWith is order with between run after intake, before the agent polls.
func (r *costRun) orderWith(n int, between func()) (perOrder, awscount.Snapshot) {
	t := r.t
	var ids []string
	var intakes []sas.Intake
	for i := range n {
		id := fmt.Sprintf("cost-%d-%d", n, i)
		ids = append(ids, id)
		// No replyTo: no status messages (each would add one SQS request).
		intakes = append(intakes, sas.Intake{OrderID: id, Workflow: registry.Payment, Payload: []byte(`{"amount":10}`)})
	}
	before := r.counter.Snapshot()
	// n ≤ 10: one SendMessage, or one SendMessageBatch.
	require.NoError(t, r.sys.Submit(r.ctx, intakes...))
	r.drain("intake-0", n)
	afterIntake := r.counter.Snapshot()
	if between != nil {
		between()
	}
	r.drain("agent-0", n)
	r.drain("scheduler-0", n)
	d := r.counter.Snapshot().Sub(before)

	// Not counted: reading the outcome back.
	for _, id := range ids {
		v, err := r.sys.Store.GetOrder(r.ctx, id)
		require.NoError(t, err)
		require.Equal(t, sas.Processed, v.State(), "order %s: %+v", id, v.Steps)
	}

	invocations := 0
	for _, k := range r.invocations {
		invocations += k
	}
	p := perOrder{
		Requests:    map[string]float64{},
		WCU:         d.WCU / float64(n),
		IndexWCU:    d.IndexWCU / float64(n),
		TxIndexWCU:  afterIntake.Sub(before).IndexWCU / float64(n), // intake writes only in its transaction
		RCU:         d.RCU / float64(n),
		Invocations: float64(invocations) / float64(n),
	}
	for k, v := range d.Requests {
		p.Requests[k] = float64(v) / float64(n)
	}
	return p, d
}

func (r *costRun) log(name string, p perOrder, d awscount.Snapshot) {
	c := costPerMillion(p)
	doubled := p
	doubled.WCU += p.TxIndexWCU
	cd := costPerMillion(doubled)
	keys := slices.Sorted(maps.Keys(p.Requests))
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%g ", k, p.Requests[k])
	}
	r.t.Logf("%s: per order: %sWCU=%g (index %g, of which in a transaction %g) RCU=%g invocations=%g", name, b.String(), p.WCU, p.IndexWCU, p.TxIndexWCU, p.RCU, p.Invocations)
	r.t.Logf("%s: totals: %s invocations=%v receives=%v", name, d, r.invocations, r.receives)
	r.t.Logf("%s: per million orders: SQS $%.3f + DynamoDB $%.3f + Lambda $%.3f = $%.3f (with transactional index writes billed double: $%.3f); Step Functions Standard $%.0f",
		name, c.SQS, c.DynamoDB, c.Lambda, c.Total(), cd.Total(), stepFunctionsPerMillionTransitions*stepFunctionsTransitionsPerOrder)
}

// aheadClock is the wall clock moved forward.
type aheadClock struct{ by time.Duration }

func (c aheadClock) Now() time.Time { return time.Now().UTC().Add(c.by) }

// TestCostPerOrder counts every AWS request a completed single-step order
// causes, from the submitter's send to the scheduler's completion (the
// remote service excluded), and the DynamoDB units, and holds them to the
// budget. An extra DynamoDB or SQS call per order fails it.
func TestCostPerOrder(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		r := newCostRun(t, false)
		p, d := r.order(1)
		r.log("single", p, d)

		require.Equal(t, map[string]int{
			"SQS.SendMessage":             3, // submit, agent request, agent reply
			"SQS.ReceiveMessage":          3, // intake, agent, scheduler queues: never empty
			"SQS.DeleteMessage":           3,
			"DynamoDB.TransactWriteItems": 1, // order + its step created claimed
			"DynamoDB.UpdateItem":         1, // the step completed
		}, d.Requests, "requests of one order: %s", d)
		// 2 items × 2 units (transactional) + 1 index entry at intake; 1 unit
		// + 1 index delete at completion. Nothing read on the hot path.
		require.Equal(t, 7.0, d.WCU, "write units: %s", d)
		require.Equal(t, 2.0, d.IndexWCU, "index write units: %s", d)
		require.Equal(t, 1.0, p.TxIndexWCU)
		require.Zero(t, d.RCU, "read units: %s", d)
		require.Equal(t, map[string]int{"intake-0": 1, "agent-0": 1, "scheduler-0": 1}, r.invocations)
		require.InDelta(t, 8.575, costPerMillion(p).Total(), 1e-9)
	})

	// An order whose request waited in the agent queue past its step's
	// deadline (docs/protocol.md, "Deadlines start at pick-up"): a sweep
	// finds the step due with no pick-up reported and moves the lease to
	// the request's delivery horizon. That wait is the order's only extra
	// cost: one UpdateItem, 1
	// write unit on the table and 2 on the index (its sort key moves: a
	// delete and a put), so 7 + 3 = 10 write units; still no read. The
	// sweep's own queries and queue-depth reads are per sweep, shared by
	// every step it finds, and counted apart. (The agent here picks the
	// request up on time by its own clock, so it reports nothing; a late
	// pick-up's report costs one SendMessage, one receive and one
	// UpdateItem more: docs/cost.md.)
	t.Run("waited", func(t *testing.T) {
		r := newCostRun(t, false)
		limits, err := r.sys.Registry.Limits()
		require.NoError(t, err)
		sup, err := supervisor.New(supervisor.Config{
			Store: r.sys.Store, Queue: r.sys.Queue, Alerter: alerts.NewRecorder(), ControlQueueURL: r.sys.Config.ControlQueueURL,
			BacklogQueueURLs: assembly.BacklogQueues(r.sys.Config), Steps: limits,
			Clock:  aheadClock{by: r.sys.Config.PickupTimeout + r.sys.Config.StepTimeout + time.Second}, // as if the deadline had passed
			Logger: r.sys.Opts.Logger, Metrics: io.Discard,
		})
		require.NoError(t, err)
		var sweep awscount.Snapshot
		p, d := r.orderWith(1, func() {
			before := r.counter.Snapshot()
			rep, err := sup.RunOnce(r.ctx)
			require.NoError(t, err)
			require.Equal(t, 1, rep.Waited, "no pick-up reported: wait, do not rescue")
			require.Zero(t, rep.Rescued)
			sweep = r.counter.Snapshot().Sub(before)
		})
		r.log("waited", p, d)
		t.Logf("waited: the sweep: %s", sweep)
		require.Equal(t, 1, sweep.Requests["DynamoDB.UpdateItem"], "one write: the wait")
		require.Equal(t, 2, sweep.Requests["SQS.GetQueueAttributes"], "the depth of the agent and scheduler queues, once per sweep")
		require.Equal(t, 3.0, sweep.WCU, "the wait: 1 table unit + 2 index units")
		require.Equal(t, 10.0, d.WCU, "7 write units of an order that did not wait + 3 for its wait: %s", d)
		require.Equal(t, map[string]int{"intake-0": 1, "agent-0": 1, "scheduler-0": 1}, r.invocations, "the late request ran once, its reply was accepted")
	})

	t.Run("batched", func(t *testing.T) {
		const n = 10
		r := newCostRun(t, true)
		p, d := r.order(n)
		r.log("batched", p, d)

		// Each poller's one receive got all ten (the emulators hand out up to ten
		// visible messages), so each handler ran once on the whole batch and
		// sent its ten messages in one SendMessageBatch.
		require.Equal(t, map[string]int{"intake-0": 1, "agent-0": 1, "scheduler-0": 1}, r.receives)
		require.Equal(t, map[string]int{"intake-0": 1, "agent-0": 1, "scheduler-0": 1}, r.invocations)
		require.Equal(t, map[string]int{
			"SQS.SendMessageBatch":        3, // submit, agent requests, agent replies
			"SQS.ReceiveMessage":          3,
			"SQS.DeleteMessageBatch":      3,
			"DynamoDB.TransactWriteItems": n,
			"DynamoDB.UpdateItem":         n,
		}, d.Requests, "requests of %d orders: %s", n, d)
		require.Equal(t, 7.0*n, d.WCU, "write units: %s", d)
		require.Equal(t, 2.0*n, d.IndexWCU, "index write units: %s", d)
		require.Zero(t, d.RCU, "read units: %s", d)

		c := costPerMillion(p)
		require.InDelta(t, 4.795, c.Total(), 1e-9)
		require.LessOrEqual(t, c.Total(), budgetPerMillionOrders, "cost per million batched orders")
	})
}
