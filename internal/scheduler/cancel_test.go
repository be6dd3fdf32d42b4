package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
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
	g.clock.Advance(leaseTime + time.Second)
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
	f.clock.Advance(time.Second)
	require.Empty(t, f.handle(f.duplicate(done(req)))) // a twin of the success: the compensation is not started twice
	require.Empty(t, f.requests())
	f.deliver(done(req)) // the success's redelivery: its undo sent again (it may not have gone out), not claimed again
	again := f.request()
	require.Equal(t, undo.Attempt, again.Attempt)
	require.True(t, again.Compensation)
	require.Equal(t, 1, transitions(f.step("o-id", 1), sas.Compensating))
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

// A cancelled step the supervisor handed back, whose attempt's transient
// reply arrives before the supervisor's retry does (simulator seed 1180):
// the reply is read without the order's steps, so the turn-away reads them
// before it plans the undos; the step is undone, newest first, and the
// order ends Cancelled with its submitter told, as by the retry's path.
func TestCancelledStepHandedBackThenItsTransientReply(t *testing.T) {
	t.Parallel()
	for _, step := range []int{0, 1} {
		t.Run(fmt.Sprintf("step %d", step), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			id := fmt.Sprintf("o-hb%d", step)
			req := f.runForward(id, "order", step)
			require.Equal(t, step, req.Step)
			f.operatorCancel(id)
			f.clock.Advance(leaseTime + time.Second)
			r := f.rescue(id, step)
			require.True(t, r.Cancelled)
			require.Equal(t, sas.Pending, r.ProcessState)

			f.deliver(reply(req, sas.OutcomeTransient, "timeout")) // the attempt's reply, before the retry
			require.Equal(t, 1, transitions(f.step(id, step), sas.Error), "turned away")
			require.Equal(t, sas.Compensating, f.step(id, step).ProcessState, "and its undo claimed at once")
			for i := step; i >= 0; i-- {
				undo := f.request()
				require.True(t, undo.Compensation)
				require.Equal(t, i, undo.Step, "newest first")
				f.deliver(done(undo))
			}
			require.Empty(t, f.requests())
			f.deliver(retryMsg(id, step, r.Attempt)) // the supervisor's retry, late: changes nothing
			require.Empty(t, f.requests())

			v := f.view(id)
			require.Equal(t, sas.Cancelled, v.State())
			require.True(t, v.Settled())
			require.Empty(t, f.alerts.all(), "a cancel pages nobody")
			ss := f.statuses()
			require.Equal(t, sas.StatusCancelled, ss[len(ss)-1].Status)
		})
	}
}

// A cancelled step with nothing to undo (a one-step workflow without an
// undo) whose attempt fails transiently: the order ends Cancelled and its
// submitter hears "cancelled", naming the step, although the reply's
// handler never read the order's steps.
func TestCancelledStepWithNothingToUndoTellsTheSubmitter(t *testing.T) {
	t.Parallel()
	f := notifyFixture(t)
	f.deliver(intake("o-nu", "notify", f.replyURL))
	req := f.request()
	f.operatorCancel("o-nu")
	f.statuses()
	f.deliver(reply(req, sas.OutcomeTransient, "timeout"))
	require.Empty(t, f.requests(), "no next attempt, nothing to undo")
	require.Equal(t, sas.Cancelled, f.view("o-nu").State())
	require.Empty(t, f.alerts.all())
	ss := f.statuses()
	require.Len(t, ss, 1)
	require.Equal(t, sas.StatusCancelled, ss[0].Status)
	require.Equal(t, "notify", ss[0].Step)
}

// undoClaimDown fails the first claim of an undo of a step in Error: the
// store unreachable right after a turn-away's write.
type undoClaimDown struct {
	sas.StateStore
	failed bool
}

func (s *undoClaimDown) Claim(ctx context.Context, p sas.ClaimParams) (sas.StepRecord, error) {
	if p.From == sas.Error && !s.failed {
		s.failed = true
		return sas.StepRecord{}, errors.New("injected: the store is unavailable")
	}
	return s.StateStore.Claim(ctx, p)
}

// The scheduler that turns a cancelled step away stops after the write and
// before its compensation's claim (simulator seeds 3326, 3387, 4931, 4975,
// 6214: a crash, a timeout). The retry that asked is redelivered and finds
// the step in Error, marked, at its own attempt: the cancellation goes on
// from there, and the order ends Cancelled with its submitter told.
func TestRedeliveredRetryOfATurnedAwayStepGoesOn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	down := &undoClaimDown{StateStore: f.calls}
	f.h = schedulerHandler(f.newServiceConfig(owner, mustDefault(t), sas.AgentQueues{Default: f.agentURL},
		func(c *scheduler.Config) { c.Store = down }))
	f.runForward("o-rd", "order", 1)
	f.operatorCancel("o-rd")
	f.clock.Advance(leaseTime + time.Second)
	r := f.rescue("o-rd", 1)

	retry := retryMsg("o-rd", 1, r.Attempt)
	require.Len(t, f.handle(f.event(retry)), 1, "the claim failed: the retry is redelivered")
	require.True(t, down.failed)
	require.Equal(t, sas.Error, f.step("o-rd", 1).ProcessState, "the turn-away was written")
	require.Empty(t, f.requests())

	f.deliver(retry) // the redelivery
	for i := 1; i >= 0; i-- {
		undo := f.request()
		require.True(t, undo.Compensation)
		require.Equal(t, i, undo.Step, "newest first")
		f.deliver(done(undo))
	}
	require.Empty(t, f.requests())
	require.Equal(t, sas.Cancelled, f.view("o-rd").State())
	require.Empty(t, f.alerts.all())
	ss := f.statuses()
	require.Equal(t, sas.StatusCancelled, ss[len(ss)-1].Status)
}

// The success of a cancelled step completes it and claims its undo; the
// undo's send fails (its handler dies before it goes out). The success's
// redelivery finds the step Compensating at the next attempt and sends
// the undo again, since nothing else would (deadlines start at pick-up:
// the supervisor does not re-send a request that may be queued; the
// simulator's seed 47). A different message about it sends nothing.
func TestRedeliveredSuccessOfACancelledStepResendsItsUndo(t *testing.T) {
	t.Parallel()
	for _, signed := range []bool{true, false} {
		t.Run(fmt.Sprintf("signed=%v", signed), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			req := f.runForward("o-rs", "order", 1)
			if !signed {
				// An agent that does not sign: its reply's leg is read from
				// the record (seed 2981), Compensating on the redelivery.
				req.Sig = ""
			}
			f.operatorCancel("o-rs")
			f.failNextSends(f.agentURL, 1)
			require.Len(t, f.handle(f.event(done(req))), 1, "the undo's send failed: the success is redelivered")
			require.Equal(t, sas.Compensating, f.step("o-rs", 1).ProcessState, "its undo claimed")
			require.Empty(t, f.requests())

			f.clock.Advance(time.Second) // later than the claim: not a retry of this very write (sas.OwnWrite)
			require.Empty(t, f.handle(f.duplicate(done(req))), "a twin of the success")
			require.Empty(t, f.requests(), "a different message sends nothing")

			f.deliver(done(req)) // the redelivery
			undo := f.request()
			require.True(t, undo.Compensation)
			require.Equal(t, 1, undo.Step)
			f.deliver(done(undo))
			f.deliver(done(f.request()))
			require.Equal(t, sas.Cancelled, f.view("o-rs").State())
			ss := f.statuses()
			require.Equal(t, sas.StatusCancelled, ss[len(ss)-1].Status)
		})
	}
}

// completeThenMarked makes the first completion that claims a successor
// commit, the submitter's cancel mark that successor right after, and the
// completion's answer be lost: the SDK's retry is refused against the
// written record (an ambiguous commit).
type completeThenMarked struct {
	sas.StateStore
	done bool
}

func (s *completeThenMarked) Complete(ctx context.Context, p sas.CompleteParams) ([]sas.StepRecord, error) {
	if s.done || p.Next == nil {
		return s.StateStore.Complete(ctx, p)
	}
	s.done = true
	recs, err := s.StateStore.Complete(ctx, p)
	if err != nil {
		return recs, err
	}
	succ := recs[len(recs)-1]
	if _, err := s.StateStore.Cancel(ctx, sas.CancelParams{Key: succ.Key(), From: sas.Processing, Attempt: succ.Attempt,
		Now: p.Now, Actor: "submitter:AROAOWNER", Reason: "changed my mind"}); err != nil {
		return nil, err
	}
	cur, err := s.StateStore.GetStep(ctx, p.Key)
	if err != nil {
		return nil, err
	}
	return nil, &sas.RaceError{Op: "Complete", Key: p.Key, Current: &cur}
}

// A completion that claimed its successor commits, a cancel marks the
// successor, and the completion's answer is lost (the simulator's seed
// 383). The claim is the scheduler's own write although a mark came after
// it (the mark changes no state, attempt or holder): the successor's
// request goes out, the step settles, and the order is undone and ends
// Cancelled, where the request was never sent and the order waited for the
// request's delivery horizon.
func TestAnAmbiguousCompletionThenACancelStillSendsTheSuccessor(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	st := &completeThenMarked{StateStore: f.calls}
	f.h = schedulerHandler(f.newServiceConfig(owner, mustDefault(t), sas.AgentQueues{Default: f.agentURL},
		func(c *scheduler.Config) { c.Store = st }))
	req := f.runForward("o-am", "order", 0)
	f.deliver(done(req))
	require.True(t, st.done)
	charge := f.step("o-am", 1)
	require.True(t, charge.Cancelled)
	require.Equal(t, sas.Processing, charge.ProcessState)
	next := f.request()
	require.Equal(t, 1, next.Step, "the successor's request goes out")
	require.False(t, next.Compensation)

	f.deliver(done(next))
	for _, step := range []int{1, 0} {
		undo := f.request()
		require.True(t, undo.Compensation)
		require.Equal(t, step, undo.Step)
		f.deliver(done(undo))
	}
	require.Equal(t, sas.Cancelled, f.view("o-am").State())
}
