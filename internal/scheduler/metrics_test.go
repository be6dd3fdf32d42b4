package scheduler_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/metrics"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
	"github.com/sas-go/sas/internal/testkit/logtest"
)

// emfLine is one decoded EMF line: its directive and its metrics' values.
type emfLine struct {
	Dimensions [][]string
	Dims       map[string]string
	Values     map[string]any
	Units      map[string]string
}

func decodeEMF(t *testing.T, out string) []emfLine {
	t.Helper()
	var lines []emfLine
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var root map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &root), l)
		var doc struct {
			AWS struct {
				CloudWatchMetrics []struct {
					Namespace  string
					Dimensions [][]string
					Metrics    []struct{ Name, Unit string }
				}
			} `json:"_aws"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &doc))
		require.Len(t, doc.AWS.CloudWatchMetrics, 1)
		d := doc.AWS.CloudWatchMetrics[0]
		require.Equal(t, metrics.Namespace, d.Namespace)
		e := emfLine{Dimensions: d.Dimensions, Dims: map[string]string{}, Values: map[string]any{}, Units: map[string]string{}}
		for _, set := range d.Dimensions {
			for _, name := range set {
				e.Dims[name] = root[name].(string)
			}
		}
		for _, m := range d.Metrics {
			e.Values[m.Name] = root[m.Name]
			e.Units[m.Name] = m.Unit
		}
		require.NotContains(t, e.Dims, "order", "never a dimension")
		lines = append(lines, e)
	}
	return lines
}

// A known sequence: an order submitted, a done step, two transient
// attempts and a give-up after the third, whose compensation starts.
func TestSchedulerPublishesStepMetrics(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var out logtest.Buffer
	reg, err := registry.Default(stepTimeout)
	require.NoError(t, err)
	f.h = scheduler.NewHandler(f.newServiceConfig(owner, reg, sas.AgentQueues{Default: f.agentURL}, func(c *scheduler.Config) { c.Metrics = &out }))

	f.deliver(intake("o-m", "order", f.replyURL))
	f.deliver(done(f.request()))
	req := f.request()
	for range 2 {
		f.deliver(transient(req, "", "503"))
		req, _ = f.nextRequest()
	}
	f.deliver(transient(req, "", "503"))
	require.Equal(t, sas.Compensating, f.view("o-m").Steps[1].ProcessState, "the given-up step is undone first")

	step := [][]string{{"Workflow", "Step", "Agent"}, {}}
	order := [][]string{{"Workflow"}, {}}
	dims := func(stepName string) map[string]string {
		return map[string]string{"Workflow": "order", "Step": stepName, "Agent": registry.PaymentsAgent}
	}
	one := float64(1)
	want := []emfLine{
		{Dimensions: order, Dims: map[string]string{"Workflow": "order"}, Values: map[string]any{"OrdersSubmitted": one}, Units: map[string]string{"OrdersSubmitted": "Count"}},
		{Dimensions: step, Dims: dims("reserve"), Values: map[string]any{"StepsDone": one}, Units: map[string]string{"StepsDone": "Count"}},
		{Dimensions: step, Dims: dims("charge"), Values: map[string]any{"StepsTransient": one, "Retries": one}, Units: map[string]string{"StepsTransient": "Count", "Retries": "Count"}},
		{Dimensions: step, Dims: dims("charge"), Values: map[string]any{"StepsTransient": one, "Retries": one}, Units: map[string]string{"StepsTransient": "Count", "Retries": "Count"}},
		{Dimensions: step, Dims: dims("charge"), Values: map[string]any{"StepsTransient": one, "GiveUps": one}, Units: map[string]string{"StepsTransient": "Count", "GiveUps": "Count"}},
		{Dimensions: order, Dims: map[string]string{"Workflow": "order"}, Values: map[string]any{"CompensationsStarted": one}, Units: map[string]string{"CompensationsStarted": "Count"}},
	}
	require.Equal(t, want, decodeEMF(t, out.String()))
	require.Contains(t, out.String(), `"order":"o-m"`, "the order is a property of the line")
}

// Every log line about a message names the message (internal/msgctx),
// the three the issue names included.
func TestLogLinesAboutAMessageCarryItsID(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var logs logtest.Buffer
	reg, err := registry.Default(stepTimeout)
	require.NoError(t, err)
	f.h = scheduler.NewHandler(f.newServiceConfig(owner, reg, sas.AgentQueues{Default: f.agentURL}, func(c *scheduler.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	}))

	in := intake("o-l", "payment", f.replyURL)
	f.deliver(in)
	req := f.request()
	f.deliver(in) // duplicate intake
	f.deliver(reply(sas.AgentRequest{OrderID: "o-l", Step: 0, Attempt: 9, LockedBy: "someone", Agent: req.Agent,
		Workflow: req.Workflow, StepName: req.StepName, Version: req.Version}, sas.OutcomeDone, "")) // stale reply
	f.deliver(retryMsg("o-l", 0, 5)) // retry lost the race

	seen := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		msg := m["msg"].(string)
		for _, want := range []string{"duplicate intake", "stale reply ignored", "retry lost the race"} {
			if strings.HasPrefix(msg, want) {
				id, _ := m["messageId"].(string)
				require.NotEmpty(t, id, "%q names its message: %s", msg, l)
				require.Equal(t, "o-l", m["order"])
				if want != "stale reply ignored" { // this reply, like an older agent's, carries no trace
					require.Equal(t, sas.TraceID(req.Trace), m["traceId"], "and the order's trace: %s", l)
				}
				seen[want] = id
			}
		}
	}
	require.Len(t, seen, 3, "each line logged: %v", seen)
	require.NotEqual(t, seen["duplicate intake"], seen["stale reply ignored"], "each its own message")
}

// An order that ends Rejected counts once in OrdersRejected (issue 27 §5):
// what took effect undone first, then rejected.
func TestARejectedOrderIsCounted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var out logtest.Buffer
	reg, err := registry.Default(stepTimeout)
	require.NoError(t, err)
	f.h = scheduler.NewHandler(f.newServiceConfig(owner, reg, sas.AgentQueues{Default: f.agentURL}, func(c *scheduler.Config) { c.Metrics = &out }))
	f.deliver(intake("o-rej", "order", f.replyURL))
	f.deliver(done(f.request()))
	f.deliver(rejectedReply(f.request(), "card declined"))
	for reqs := f.requests(); len(reqs) > 0; reqs = f.requests() { // the undos, charge's then reserve's
		require.True(t, reqs[0].Compensation)
		f.deliver(done(reqs[0]))
	}
	require.Equal(t, sas.Rejected, f.view("o-rej").State())
	n := 0
	for _, l := range decodeEMF(t, out.String()) {
		if v, ok := l.Values[metrics.OrdersRejected]; ok {
			require.EqualValues(t, 1, v)
			n++
		}
	}
	require.Equal(t, 1, n, "once, in one line of both dimension sets: {Workflow} and {}")
}
