package agenthost_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/agenthost"
	"github.com/sas-go/sas/internal/httpcall"
	"github.com/sas-go/sas/internal/memqueue"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
)

// A known sequence: a request that waited 3s and took 2s, done; one that
// failed transiently after 1s; one left without an outcome. Each line has
// the request's queue wait, its execution time and its outcome, under
// {Workflow, Step, Agent} and {Agent}; the order id is a property only.
func TestAgentPublishesQueueWaitExecutionTimeAndOutcome(t *testing.T) {
	t.Parallel()
	r := newServiceRig(t, memqueue.Options{})
	var out bytes.Buffer
	svc := r.service(agenthost.Config{Metrics: &out, Agents: payments(func(_ context.Context, req sas.AgentRequest) (json.RawMessage, error) {
		switch req.OrderID {
		case "o-done":
			r.clock.Advance(2 * time.Second)
			return json.RawMessage(`{}`), nil
		case "o-transient":
			r.clock.Advance(time.Second)
			return nil, httpcall.ErrTransient
		}
		return nil, httpcall.ErrTransient // no TransientOutcome: no outcome
	})})
	tr := sas.NewTrace("o-done", clocktest.T0)
	sent := func(ev any, ago time.Duration) {
		e := event(ev)
		e.Records[0].Attributes = map[string]string{"SentTimestamp": strconv.FormatInt(r.clock.Now().Add(-ago).UnixMilli(), 10)}
		_, err := svc.Handle(t.Context(), e)
		require.NoError(t, err)
	}
	sent(request("o-done", func(q *sas.AgentRequest) { q.Trace = tr }), 3*time.Second)
	sent(request("o-transient", timeout(time.Hour), completeBy(clocktest.T0.Add(time.Hour)), func(q *sas.AgentRequest) { q.TransientOutcome = true }), 0)
	sent(request("o-none", compensation, timeout(time.Hour), completeBy(clocktest.T0.Add(time.Hour))), 500*time.Millisecond)

	reps := r.replies()
	require.Len(t, reps, 2)
	require.Equal(t, sas.TraceID(tr), sas.TraceID(reps[0].Trace), "the reply carries the request's trace")
	require.NotEqual(t, tr, reps[0].Trace, "in a span of its own")
	// The reply carries the same figures as the metrics, for the order's
	// page: a measured 0 wait is 0, not absent.
	require.Equal(t, sas.RunTiming{Queued: sas.MillisOf(3 * time.Second), Ran: sas.MillisOf(2 * time.Second)}, reps[0].Timing(), "o-done")
	require.Equal(t, sas.RunTiming{Queued: sas.MillisOf(0), Ran: sas.MillisOf(time.Second)}, reps[1].Timing(), "o-transient")

	lines := decodeLines(t, out.String())
	require.Len(t, lines, 3)
	dims := [][]string{{"Workflow", "Step", "Agent"}, {"Agent"}}
	type want struct {
		step    string
		values  map[string]float64
		orderID string
	}
	for i, w := range []want{
		{"charge", map[string]float64{"QueueWait": 3000, "ExecutionTime": 2000, "AgentDone": 1}, "o-done"},
		{"charge", map[string]float64{"QueueWait": 0, "ExecutionTime": 1000, "AgentTransient": 1}, "o-transient"},
		{"charge:undo", map[string]float64{"QueueWait": 500, "ExecutionTime": 0, "AgentNoOutcome": 1}, "o-none"},
	} {
		l := lines[i]
		require.Equal(t, dims, l.dims, "line %d", i)
		require.Equal(t, "payment", l.root["Workflow"])
		require.Equal(t, w.step, l.root["Step"])
		require.Equal(t, "payments", l.root["Agent"])
		require.Equal(t, w.orderID, l.root["order"])
		got := map[string]float64{}
		for name, unit := range l.units {
			got[name] = l.root[name].(float64)
			if name == "QueueWait" || name == "ExecutionTime" {
				require.Equal(t, "Milliseconds", unit)
			} else {
				require.Equal(t, "Count", unit)
			}
		}
		require.Equal(t, w.values, got, "line %d", i)
	}
	require.Equal(t, sas.TraceID(tr), lines[0].root["traceId"])
}

type decoded struct {
	root  map[string]any
	dims  [][]string
	units map[string]string
}

func decodeLines(t *testing.T, out string) []decoded {
	t.Helper()
	var ls []decoded
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var root map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &root))
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
		d := doc.AWS.CloudWatchMetrics[0]
		require.Equal(t, "SAS", d.Namespace)
		units := map[string]string{}
		for _, m := range d.Metrics {
			units[m.Name] = m.Unit
		}
		ls = append(ls, decoded{root: root, dims: d.Dimensions, units: units})
	}
	return ls
}

// A delivery that does not say when it was sent (no SentTimestamp) gives a
// reply with the execution time alone: the queue wait is unknown, not 0.
func TestAReplyWithoutASentTimestampHasNoQueueWait(t *testing.T) {
	t.Parallel()
	r := newServiceRig(t, memqueue.Options{})
	svc := r.service(agenthost.Config{Agents: payments(func(context.Context, sas.AgentRequest) (json.RawMessage, error) {
		r.clock.Advance(750 * time.Millisecond)
		return json.RawMessage(`{}`), nil
	})})
	_, err := svc.Handle(t.Context(), event(request("o-nots")))
	require.NoError(t, err)
	reps := r.replies()
	require.Len(t, reps, 1)
	require.True(t, reps[0].QueuedMs.IsZero())
	require.Equal(t, sas.MillisOf(750*time.Millisecond), reps[0].RanMs)
	require.NotContains(t, sas.Encode(reps[0]), "queuedMs")
}
