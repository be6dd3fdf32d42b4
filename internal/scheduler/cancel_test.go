package scheduler_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// cancelFrom is an event of one cancel message from queue arn, sent by sender.
func (f *fixture) cancelFrom(arn, sender, id string) events.SQSEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgCounter++
	body := sas.Encode(sas.Cancel{V: sas.MessageVersion, Kind: sas.KindCancel, OrderID: id, Reason: "customer changed their mind"})
	return events.SQSEvent{Records: []events.SQSMessage{{
		MessageId: fmt.Sprintf("msg-%d", f.msgCounter), Body: body, EventSource: "aws:sqs", EventSourceARN: arn,
		Attributes: map[string]string{"SenderId": sender},
	}}}
}

// operatorCancel cancels an order from the control queue.
func (f *fixture) operatorCancel(id string) {
	f.t.Helper()
	require.Empty(f.t, f.handle(f.cancelFrom(controlARN, "AIDAOPERATOR", id)))
}

// A cancel while a step is in flight: the step is let to settle, no
// successor starts, what took effect is undone newest first, the order
// ends Cancelled, the submitter hears "cancelled", nobody is paged.
func TestCancelInFlightLetsTheStepSettleThenUndoes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req := f.runForward("o-cx", "order", 1) // reserve done, charge in flight
	require.Equal(t, 1, req.Step)

	f.operatorCancel("o-cx")
	require.Empty(t, f.requests(), "nothing is sent while the step in flight settles")
	charge := f.step("o-cx", 1)
	require.True(t, charge.Cancelled)
	require.Equal(t, sas.Processing, charge.ProcessState, "the step in flight keeps running")
	require.Equal(t, sas.Processing, f.view("o-cx").State())
	require.Contains(t, charge.History[len(charge.History)-1].Reason, "cancel requested by sender:AIDAOPERATOR", "the actor is in the history")

	f.deliver(done(req)) // charge succeeds after the cancel
	undo := f.request()
	require.True(t, undo.Compensation)
	require.Equal(t, 1, undo.Step, "newest first: the charge is refunded first")
	require.Equal(t, sas.Pending, f.step("o-cx", 2).ProcessState, "ship never starts")
	require.Equal(t, 0, f.step("o-cx", 2).Attempt)

	f.deliver(done(undo))
	undo = f.request()
	require.Equal(t, 0, undo.Step)
	f.deliver(done(undo))
	require.Empty(t, f.requests())

	v := f.view("o-cx")
	require.Equal(t, sas.Cancelled, v.State())
	require.True(t, v.Settled())
	require.Equal(t, []sas.ProcessState{sas.Compensated, sas.Compensated, sas.Pending}, f.states("o-cx"))
	require.Empty(t, f.alerts.all(), "a cancel pages nobody")
	ss := f.statuses()
	require.Equal(t, sas.StatusCancelled, ss[len(ss)-1].Status)
	require.Equal(t, "charge", ss[len(ss)-1].Step)
	for _, s := range ss {
		require.NotEqual(t, sas.StatusProcessed, s.Status)
		require.NotEqual(t, sas.StatusFailed, s.Status)
	}
}

// The same cancel from the order's own submitter, on the intake queue;
// another sender's cancel changes nothing and tells nobody.
func TestSubmitterCancelsOnlyItsOwnOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ev := f.event(intake("o-sub", "order", f.replyURL))
	ev.Records[0].Attributes = map[string]string{"SenderId": "AROAOWNER:i-1"}
	require.Empty(t, f.handle(ev))
	req := f.request()

	before := len(f.statuses())
	require.Empty(t, f.handle(f.cancelFrom(intakeARN, "AROAOTHER:i-9", "o-sub")))
	require.False(t, f.step("o-sub", 0).Cancelled, "another sender cannot reach the order")
	require.Len(t, f.statuses(), 0, "and is told nothing (statuses drained before: %d)", before)

	require.Empty(t, f.handle(f.cancelFrom(intakeARN, "AROAOWNER:i-2", "o-sub"))) // another instance of the same role
	require.True(t, f.step("o-sub", 0).Cancelled)
	require.Contains(t, f.step("o-sub", 0).History[len(f.step("o-sub", 0).History)-1].Reason, "submitter:AROAOWNER")

	f.deliver(reply(req, sas.OutcomeFailed, "card declined")) // the step fails on its own meanwhile
	undo := f.request()
	require.True(t, undo.Compensation, "a refusal is not proof of no effect: its undo runs")
	f.deliver(done(undo))
	require.Equal(t, sas.Cancelled, f.view("o-sub").State())
	require.Empty(t, f.alerts.all(), "the failure of a cancelled order's step pages nobody")
	ss := f.statuses()
	require.Equal(t, sas.StatusCancelled, ss[len(ss)-1].Status)
}

// A cancel of a finished order is refused with its reason, to the
// submitter too, and changes nothing.
func TestCancelOfAFinishedOrderIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.runForward("o-fin", "order", 3)
	require.Equal(t, sas.Processed, f.view("o-fin").State())
	f.statuses()
	f.operatorCancel("o-fin")
	require.Equal(t, sas.Processed, f.view("o-fin").State())
	for _, r := range f.view("o-fin").Steps {
		require.False(t, r.Cancelled)
	}
	ss := f.statuses()
	require.Len(t, ss, 1)
	require.Equal(t, sas.StatusCancelRefused, ss[0].Status)
	require.Contains(t, ss[0].Reason, "it completed")
}

// A transient outcome of a cancelled step gets no next attempt; a step the
// supervisor hands back after the cancel never starts again.
func TestCancelledStepGetsNoNextAttempt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req := f.runForward("o-tr", "order", 1)
	f.operatorCancel("o-tr")
	f.deliver(reply(req, sas.OutcomeTransient, "timeout"))
	undo := f.request()
	require.True(t, undo.Compensation)
	require.Equal(t, 1, undo.Step, "the step that ran is undone under its key")
	require.Equal(t, 2, f.step("o-tr", 1).Attempt-0+0, "no attempt after the cancel") // attempt 1 claimed, undo claim made it 2

	g := newFixture(t)
	req = g.runForward("o-sv", "order", 1)
	g.operatorCancel("o-sv")
	g.clock.Advance(stepTimeout + time.Second)
	r := g.rescue("o-sv", 1) // the agent went quiet
	require.True(t, r.Cancelled, "a rescue keeps the mark")
	g.deliver(retryMsg("o-sv", 1, r.Attempt))
	undo = g.request()
	require.True(t, undo.Compensation, "turned away and undone, never claimed again")
	require.Equal(t, 1, undo.Step)
	g.deliver(done(undo))
	g.deliver(done(g.request()))
	require.Equal(t, sas.Cancelled, g.view("o-sv").State())
	require.Empty(t, g.alerts.all())
	_ = req
}

// compensate on an order with a step in flight is refused where it is
// dropped, and cancel is what takes effect once the step settles.
func TestCancelIsIdempotent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req := f.runForward("o-id", "order", 1)
	f.operatorCancel("o-id")
	f.operatorCancel("o-id") // a redelivery, or a second operator
	require.Equal(t, 1, transitionsFor(f.step("o-id", 1), "cancel requested"))
	f.deliver(done(req))
	undo := f.request()
	f.deliver(done(req)) // a duplicate of the success: the compensation is not started twice
	require.Empty(t, f.requests())
	f.deliver(done(undo))
	f.deliver(done(f.request()))
	require.Equal(t, sas.Cancelled, f.view("o-id").State())
	f.operatorCancel("o-id") // after the end: the end is told again
	ss := f.statuses()
	require.Equal(t, sas.StatusCancelled, ss[len(ss)-1].Status)
}

func transitionsFor(r sas.StepRecord, reason string) int {
	n := 0
	for _, h := range r.History {
		if len(h.Reason) >= len(reason) && h.Reason[:len(reason)] == reason {
			n++
		}
	}
	return n
}
