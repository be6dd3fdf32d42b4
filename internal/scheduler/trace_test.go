package scheduler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// The submitter's trace is the order's: its requests carry it, a
// redelivered intake re-sends the same context, a retry (with no trace
// of its own, as from an older supervisor) takes the stored one, and an
// intake with a trace that is not valid starts one of its own.
func TestSubmittersTraceReachesEveryRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const submitted = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	in := strings.Replace(intake("o-tr", "payment", f.replyURL), `"v":1`, `"v":1,"trace":"`+submitted+`"`, 1)
	f.deliver(in)
	req := f.request()
	require.Equal(t, sas.TraceID(submitted), sas.TraceID(req.Trace))
	require.NotEqual(t, submitted, req.Trace, "a span of its own")
	require.Equal(t, submitted, f.view("o-tr").Order.Trace, "stored with the order")
	for _, st := range f.statuses() {
		require.Equal(t, sas.TraceID(submitted), sas.TraceID(st.Trace), "statuses too")
	}

	f.deliver(in) // redelivered: the live request again, the same context
	require.Equal(t, req.Trace, f.request().Trace)

	f.clock.Advance(leaseTime)
	f.rescue("o-tr", 0)
	f.deliver(retryMsg("o-tr", 0, 1))
	again := f.request()
	require.Equal(t, 2, again.Attempt)
	require.Equal(t, sas.TraceID(submitted), sas.TraceID(again.Trace), "from the stored order")
	require.NotEqual(t, req.Trace, again.Trace, "another attempt, another span")

	f.clock.Advance(time.Minute) // past the first request's visibility
	f.drain(f.agentURL)
	f.deliver(strings.Replace(intake("o-bad", "payment", ""), `"v":1`, `"v":1,"trace":"not-a-traceparent"`, 1))
	require.True(t, sas.ValidTrace(f.request().Trace), "a trace started instead")
}

// A signed reply from an agent built before traces echoes no trace: what
// the scheduler sends next (the successor's request, the statuses, the next
// attempt after a transient outcome) carries the order's stored trace,
// which costs that reply one GetOrder; a reply that carries its trace
// costs none.
func TestAReplyWithoutATraceTakesTheOrders(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-old", "order", f.replyURL))
	stored := f.view("o-old").Order.Trace
	require.True(t, sas.ValidTrace(stored))
	req := f.request()
	f.statuses()
	f.calls.take()

	f.deliver(untracedReply(req, sas.OutcomeDone, ""))
	calls, _ := f.calls.take()
	require.Equal(t, map[string]int{"GetOrder": 1, "Complete": 1}, calls, "one read for the trace")
	next := f.request()
	require.Equal(t, 1, next.Step)
	require.Equal(t, sas.TraceID(stored), sas.TraceID(next.Trace), "the successor's request: the order's trace")
	for _, st := range f.statuses() {
		require.Equal(t, sas.TraceID(stored), sas.TraceID(st.Trace), "status %s", st.Status)
	}

	f.deliver(strings.Replace(untracedReply(next, sas.OutcomeTransient, "503"), `"outcome"`, `"errorType":"Unavailable","outcome"`, 1))
	again, _ := f.nextRequest()
	require.Equal(t, 2, again.Attempt)
	require.Equal(t, sas.TraceID(stored), sas.TraceID(again.Trace), "the next attempt's request: the order's trace")

	f.calls.take()
	f.deliver(done(again)) // a current agent: its reply carries the trace
	calls, _ = f.calls.take()
	// The one read is for the results of the steps before step 1 (results.go),
	// not for the trace.
	require.Equal(t, map[string]int{"GetOrder": 1, "Complete": 1}, calls, "no read for the trace")
	require.Equal(t, sas.TraceID(stored), sas.TraceID(f.request().Trace))
}
