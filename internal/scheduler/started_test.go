package scheduler_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
)

// TestAStartedReportMovesTheDeadlineToThePickUp: an agent that picked a
// request up late reports it (outcome started); the scheduler records the
// pick-up with one fenced write, the attempt's deadline now its step
// timeout plus the reply's grace (the pick-up timeout) from the report,
// and sends nothing. The outcome that follows is recorded as ever. A report
// for an attempt no longer current changes nothing.
func TestAStartedReportMovesTheDeadlineToThePickUp(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-late", "payment", f.replyURL))
	req := f.request()
	f.statuses()
	before := f.step("o-late", 0)

	f.clock.Advance(time.Hour) // it waited an hour in the agent queue
	f.calls.take()
	f.deliver(reply(req, sas.OutcomeStarted, ""))
	calls, _ := f.calls.take()
	require.Equal(t, map[string]int{"Start": 1}, calls, "one write, no read")
	require.Empty(t, f.requests(), "a report sends nothing")
	require.Empty(t, f.statuses())
	r := f.step("o-late", 0)
	require.Equal(t, sas.Processing, r.ProcessState)
	require.Equal(t, req.LockedBy, r.LockedBy)
	require.Equal(t, 1, r.Attempt)
	require.Equal(t, f.clock.Now(), r.StartedAt)
	require.Equal(t, f.clock.Now().Add(leaseTime), r.CompleteBy, "the step's timeout and the reply's grace, from the pick-up")
	require.Len(t, r.History, len(before.History), "a report adds no history")

	// Redelivered: the same write again, the deadline from now.
	f.clock.Advance(time.Second)
	f.deliver(reply(req, sas.OutcomeStarted, ""))
	require.Equal(t, f.clock.Now().Add(leaseTime), f.step("o-late", 0).CompleteBy)

	f.deliver(done(req))
	require.Equal(t, []sas.ProcessState{sas.Processed}, f.states("o-late"))
	require.True(t, f.step("o-late", 0).StartedAt.IsZero(), "the completion ends the lease and its pick-up")

	// A report after the attempt ended: nothing written.
	after := f.view("o-late")
	f.deliver(reply(req, sas.OutcomeStarted, ""))
	require.Equal(t, after.Steps, f.view("o-late").Steps)
	require.Empty(t, f.requests())
}

// TestAStartedReportForARescuedAttemptChangesNothing: the supervisor took
// the attempt back before its report came: the report is stale.
func TestAStartedReportForARescuedAttemptChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-gone", "payment", ""))
	req := f.request()
	f.started("o-gone", 0)
	f.clock.Advance(leaseTime + time.Second)
	f.rescue("o-gone", 0)
	before := f.view("o-gone")
	f.deliver(reply(req, sas.OutcomeStarted, ""))
	require.Equal(t, before.Steps, f.view("o-gone").Steps)
	require.Empty(t, f.requests())
}

// TestUndosGoToThePriorityLane: an undo's request goes to its agent's
// priority lane, whatever the order's priority, so that a backlog of
// forward requests in the agent's queue does not starve compensations; the
// request still echoes the order's priority.
func TestUndosGoToThePriorityLane(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	qs := f.agentQueues([]string{"flights", "hotels", "payments"}, "flights", "payments")
	h := scheduler.NewHandler(f.newServiceWith("scheduler-1", registryOf(t, tripV2()), qs))
	in, _ := json.Marshal(map[string]any{"orderId": "o-undo", "workflow": "trip"})
	require.Empty(t, f.handleWith(h, f.event(string(in))))
	flight := f.oneRequestAt(qs.ByAgent["flights"].URL)
	require.Empty(t, f.handleWith(h, f.event(done(flight))))
	hotel := f.oneRequestAt(qs.ByAgent["hotels"].URL)
	require.Empty(t, f.handleWith(h, f.event(reply(hotel, sas.OutcomeFailed, "no rooms"))))

	// The refused step is undone first (its agent has no lane: its queue).
	hotelUndo := f.oneRequestAt(qs.ByAgent["hotels"].URL)
	require.True(t, hotelUndo.Compensation)
	require.Empty(t, f.handleWith(h, f.event(done(hotelUndo))))
	undo := f.oneRequestAt(qs.ByAgent["flights"].PriorityURL)
	require.True(t, undo.Compensation)
	require.Zero(t, undo.Priority, "the order's own priority, echoed")
	require.Empty(t, f.requestsAt(qs.ByAgent["flights"].URL), "not behind the forward work")
}

// TestAStartedReportThatWaitedWidensTheGraceByItsWait: a report that
// waited in the scheduler queue (its SentTimestamp minutes old) comes with
// its answer in the same backlog, sent after it; the deadline allows the
// answer as long again. A report whose send time is unknown, or in the
// future (a clock's skew), gets the fixed grace.
func TestAStartedReportThatWaitedWidensTheGraceByItsWait(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-backlog", "payment", f.replyURL))
	req := f.request()
	f.statuses()

	f.clock.Advance(time.Hour)
	report := reply(req, sas.OutcomeStarted, "")
	// sent is body's delivery with SQS's SentTimestamp at.
	sent := func(body string, at time.Time) events.SQSEvent {
		ev := f.event(body)
		ev.Records[0].Attributes = map[string]string{"SentTimestamp": strconv.FormatInt(at.UnixMilli(), 10)}
		return ev
	}
	require.Empty(t, f.handle(sent(report, f.clock.Now().Add(-7*time.Minute))))
	r := f.step("o-backlog", 0)
	require.Equal(t, f.clock.Now(), r.StartedAt)
	require.Equal(t, f.clock.Now().Add(7*time.Minute+leaseTime), r.CompleteBy, "the fixed grace, and the report's seven minutes in the queue")

	// Its redelivery: the wait counted from the same send, so longer.
	f.clock.Advance(time.Minute)
	require.Empty(t, f.handle(sent(report, f.clock.Now().Add(-8*time.Minute))))
	require.Equal(t, f.clock.Now().Add(8*time.Minute+leaseTime), f.step("o-backlog", 0).CompleteBy)

	// A report never moves the deadline earlier.
	before := f.step("o-backlog", 0).CompleteBy
	f.clock.Advance(time.Second)
	require.Empty(t, f.handle(sent(report, f.clock.Now())))
	require.Equal(t, before, f.step("o-backlog", 0).CompleteBy)

	f.deliver(done(req))
	require.Equal(t, []sas.ProcessState{sas.Processed}, f.states("o-backlog"))

	// A send time in the future is a skewed clock: no wait.
	f.deliver(intake("o-skew", "payment", f.replyURL))
	skewed := f.request()
	f.clock.Advance(time.Hour)
	require.Empty(t, f.handle(sent(reply(skewed, sas.OutcomeStarted, ""), f.clock.Now().Add(time.Minute))))
	require.Equal(t, f.clock.Now().Add(leaseTime), f.step("o-skew", 0).CompleteBy)
}
