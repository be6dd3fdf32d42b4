package scheduler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
	"github.com/sas-go/sas/workflow"
)

// A cancel while three branches are in flight marks each (one read, one
// fenced write per branch), sends nothing, and lets each settle: one
// succeeds, one reports a transient failure (no next attempt: it fails),
// the last succeeds. The join never starts. Once the last has settled,
// every step that took effect, or may have, in every branch is undone,
// newest first; the order ends Cancelled, the submitter is told, nobody
// is paged.
func TestCancelWithBranchesInFlightLetsEachSettleThenUndoesEveryBranch(t *testing.T) {
	t.Parallel()
	f := graphFixture(t)
	f.deliver(intake("o-bx", "trip", f.replyURL))
	f.deliver(done(f.request()))
	reqs := byStep(f.requests())
	require.Len(t, reqs, 3)
	f.calls.take()

	f.operatorCancel("o-bx")
	calls, _ := f.calls.take()
	require.Equal(t, map[string]int{"GetOrder": 1, "Cancel": 3}, calls, "one read, one mark per branch in flight")
	require.Empty(t, f.requests(), "nothing is sent while the branches settle")
	for _, i := range []int{1, 2, 3} {
		r := f.step("o-bx", i)
		require.True(t, r.Cancelled, "step %d marked", i)
		require.Equal(t, sas.Processing, r.ProcessState, "step %d keeps running", i)
	}

	f.clock.Advance(time.Second)
	f.deliver(done(reqs["car"]))
	require.Empty(t, f.requests(), "no undo while flight and hotel are in flight")
	require.Equal(t, sas.Processed, f.step("o-bx", 3).ProcessState)
	f.clock.Advance(time.Second)
	f.deliver(transient(reqs["hotel"], "Timeout", "no answer"))
	require.Empty(t, f.requests(), "no next attempt of a marked branch, and no undo while flight is in flight")
	require.Equal(t, sas.Error, f.step("o-bx", 2).ProcessState)
	require.Equal(t, 1, f.step("o-bx", 2).Attempt)
	f.clock.Advance(time.Second)
	f.deliver(done(reqs["flight"]))

	require.Equal(t, []int{1, 2, 3, 0}, f.undoAll(), "newest first (flight, hotel, car, quote): every branch, the failed one included")
	v := f.view("o-bx")
	require.Equal(t, sas.Cancelled, v.State())
	require.True(t, v.Settled())
	require.Equal(t, 0, v.Steps[4].Attempt, "pay never started")
	require.Empty(t, f.alerts.all(), "a cancel pages nobody, a branch's failure after it included")
	ss := f.statuses()
	require.Equal(t, sas.StatusCancelled, ss[len(ss)-1].Status)
	for _, s := range ss {
		require.NotEqual(t, sas.StatusFailed, s.Status)
	}
}

// A branch's completion planned before a cancel's first mark landed on its
// sibling (the cancel's delivery died before it marked this branch too):
// the mark moves no state, but the completion is fenced on its sibling as
// read, mark included (sas.StepSeen), so its write loses, it plans again,
// finds the order cancelled, and claims nothing: the step after it never
// starts. The sibling settles and the order ends Cancelled.
func TestABranchCompletingAcrossACancelsMarkClaimsNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	step := func(name string, after ...string) workflow.Step {
		return workflow.Step{Name: name, Agent: "x", Action: "POST /" + name, Timeout: workflow.Duration(stepTimeout), After: after}
	}
	reg, err := registry.FromDefinitions([]workflow.Workflow{{Name: "fork", Steps: []workflow.Step{
		step("a"), step("b", "a"), step("c", "a"), step("d", "b"), // d follows b alone
	}}})
	require.NoError(t, err)
	f.svc = f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL})
	f.h = schedulerHandler(f.svc)
	f.deliver(intake("o-bm", "fork", f.replyURL))
	f.deliver(done(f.request()))
	reqs := byStep(f.requests())

	rs := &raceStore{StateStore: f.calls}
	rs.hook = func() {
		c := f.step("o-bm", 2)
		_, err := f.mem.Cancel(f.ctx, sas.CancelParams{Key: c.Key(), From: sas.Processing, Attempt: c.Attempt, Now: f.clock.Now(), Actor: "submitter:app"})
		require.NoError(t, err)
	}
	racing := f.newServiceConfig("scheduler-3", reg, sas.AgentQueues{Default: f.agentURL}, func(c *scheduler.Config) { c.Store = rs })
	require.NoError(t, racing.Reply(f.ctx, signedReply(reqs["b"], sas.OutcomeDone, "")))
	require.Empty(t, f.requests(), "the step after the branch is not started")
	require.Equal(t, sas.Processed, f.step("o-bm", 1).ProcessState, "the branch is recorded")
	require.Equal(t, 0, f.step("o-bm", 3).Attempt, "d never claimed")

	f.deliver(done(reqs["c"]))
	require.Empty(t, f.requests(), "nothing to undo (no step has an undo)")
	v := f.view("o-bm")
	require.Equal(t, sas.Cancelled, v.State())
	require.True(t, v.Settled())
	require.Equal(t, 0, v.Steps[3].Attempt)
	ss := f.statuses()
	require.Equal(t, sas.StatusCancelled, ss[len(ss)-1].Status)
	require.Equal(t, "c", ss[len(ss)-1].Step)
}

// failRaceStore runs hook once, before the first Fail of step.
type failRaceStore struct {
	sas.StateStore
	step int
	once sync.Once
	hook func()
}

func (s *failRaceStore) Fail(ctx context.Context, p sas.FailParams) (sas.StepRecord, error) {
	if p.Key.Step == s.step {
		s.once.Do(s.hook)
	}
	return s.StateStore.Fail(ctx, p)
}

// Deep sweep seed 13298: a cancel lands on a branch in flight (b, an
// agent's) and a branch waiting for a completion (c). The cancel's handler
// ends c's wait and, having read b in flight, leaves the undos to b's
// settling. b's reply, handled at the same time, completes b, reads c
// still waiting and ends its wait too, but loses that write to the
// cancel's: it must read again and start the undos, since everything has
// settled. It took the loss for "whoever moved it goes on", and nothing
// undid a and b.
func TestACancelledWaitEndedByAnotherHandlerStillStartsTheUndos(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	reg, err := registry.FromDefinitions([]workflow.Workflow{{Name: "fork-cb", Steps: []workflow.Step{
		{Name: "a", Agent: "x", Action: "POST /a", Undo: "POST /a/undo", Timeout: workflow.Duration(stepTimeout)},
		{Name: "b", Agent: "x", Action: "POST /b", Undo: "POST /b/undo", Timeout: workflow.Duration(stepTimeout), After: []string{"a"}},
		{Name: "c", Callback: &workflow.Callback{Timeout: workflow.Duration(time.Hour)}, After: []string{"a"}},
	}}})
	require.NoError(t, err)
	f.svc = f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL})
	f.h = schedulerHandler(f.svc)
	f.deliver(intake("o-13298", "fork-cb", f.replyURL))
	f.deliver(done(f.request()))
	b := f.request()
	require.Equal(t, "b", b.StepName)

	// The cancel's marks, and its handler's end of c's wait, which the
	// hook makes just before b's handler tries the same.
	for _, i := range []int{1, 2} {
		r := f.step("o-13298", i)
		_, err := f.mem.Cancel(f.ctx, sas.CancelParams{Key: r.Key(), From: sas.Processing, Attempt: r.Attempt, Now: f.clock.Now(), Actor: "operator:alice"})
		require.NoError(t, err)
	}
	rs := &failRaceStore{StateStore: f.calls, step: 2}
	rs.hook = func() {
		c := f.step("o-13298", 2)
		// A moment before b's handler: a write of another's, not its own.
		_, err := f.mem.Fail(f.ctx, sas.FailParams{Key: c.Key(), Owner: c.LockedBy, Attempt: c.Attempt, Now: f.clock.Now().Add(-time.Millisecond), Reason: "the cancel's handler ends the wait"})
		require.NoError(t, err)
	}
	racing := f.newServiceConfig("scheduler-3", reg, sas.AgentQueues{Default: f.agentURL}, func(c *scheduler.Config) { c.Store = rs })
	require.NoError(t, racing.Reply(f.ctx, signedReply(b, sas.OutcomeDone, "")))
	require.Equal(t, sas.Compensating, f.step("o-13298", 1).ProcessState, "b settled last: its handler starts the undos")
	require.Equal(t, sas.Error, f.step("o-13298", 2).ProcessState)

	require.Equal(t, []int{1, 0}, f.undoAll(), "b's settling, the last, starts the undos: b, then a")
	v := f.view("o-13298")
	require.Equal(t, sas.Cancelled, v.State())
	require.True(t, v.Settled())
	ss := f.statuses()
	require.Equal(t, sas.StatusCancelled, ss[len(ss)-1].Status)
	for _, a := range f.alerts.all() {
		require.Contains(t, a.ID, "/waiting/", "a cancel pages nobody: only people told that c waits")
	}
}

// A cancel that turns away a branch handed back (rescued, Pending), while
// another branch, marked, settles between the cancel's read and that
// turning away: the settling branch's handler reads the handed-back branch
// ready and unmarked, and the cancel, judging from its own read, sees the
// settling branch still in flight. Each would leave the undos to the other
// (the simulator's deep sweep seed 53403, where the order stood for good),
// so the settling branch's handler turns the ready one away itself
// (afterCancel), whether its branch succeeded or failed. The cancel's own
// turn-away then loses, and it reads again; the undos start once.
func TestACancelledBranchSettlingWhileTheCancelMarksTurnsAwayTheReadyOne(t *testing.T) {
	t.Parallel()
	for name, settle := range map[string]func(sas.AgentRequest) string{
		"done":      done,
		"transient": func(req sas.AgentRequest) string { return transient(req, "Timeout", "no answer") },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := graphFixture(t)
			const id = "o-bx-race"
			f.deliver(intake(id, "trip", f.replyURL))
			f.deliver(done(f.request()))
			reqs := byStep(f.requests())
			require.Len(t, reqs, 3)
			f.deliver(done(reqs["flight"]))
			f.clock.Advance(time.Hour) // car's deadline passes: the supervisor hands it back
			require.Equal(t, sas.Pending, f.rescue(id, 3).ProcessState)

			raced := false
			f.store.beforeCancel = func(p sas.CancelParams) bool {
				if p.Key.Step != 3 || raced {
					return false // the settling handler's own turn-away, inside the race
				}
				raced = true
				f.clock.Advance(time.Second)     // another handling, later
				f.deliver(settle(reqs["hotel"])) // hotel, marked, settles before the cancel turns car away
				return true
			}
			f.operatorCancel(id)
			require.Nil(t, f.store.beforeCancel, "the race happened")
			require.NotEqual(t, sas.Processing, f.step(id, 2).ProcessState, "hotel settled")
			car := f.step(id, 3)
			require.True(t, car.Cancelled, "car turned away")
			require.NotEqual(t, sas.Pending, car.ProcessState, "car turned away")

			undone := f.undoAll() // one undo request at a time: the two handlers sent the first once
			require.Contains(t, undone, 0, "the undos start: quote among them")
			require.Contains(t, undone, 1, "flight took effect and is undone")
			require.Contains(t, undone, 2, "hotel took effect, or may have, and is undone")
			require.Equal(t, sas.Cancelled, f.view(id).State())
			require.Empty(t, f.alerts.all(), "a cancel pages nobody")
		})
	}
}
