package scheduler_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// Duplicate agent requests are normal. A remote that declines the first
// call without storing the outcome and succeeds on the second (same key)
// produces a "failed" then a "done" for one attempt, and the "done" may
// never arrive (its delivery's reply lost, the message deleted by the
// refusal's delivery). So a refusal is not proof of no effect: the order's
// compensation undoes the refused step too, first, under the step's key,
// and a late success finds the undo running (an undo commutes with its do).
func TestSuccessAfterRefusalIsUndone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	charge := f.runForward("o-late", "order", 1)
	require.Equal(t, "charge", charge.StepName)

	f.deliver(reply(charge, sas.OutcomeFailed, "declined (not stored)"))
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Compensating, sas.Pending}, f.states("o-late"))
	undo1 := f.request()
	require.Equal(t, 1, undo1.Step)
	require.True(t, undo1.Compensation)
	require.Equal(t, "o-late:1:undo", undo1.IdempotencyKey)

	f.deliver(done(charge)) // the twin request's success
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Compensating, sas.Pending}, f.states("o-late"),
		"a late success moves nothing: the step's undo is running")
	require.Empty(t, f.requests())

	f.deliver(done(undo1))
	undo0 := f.request()
	require.Equal(t, 0, undo0.Step)
	f.deliver(done(undo0))
	require.Empty(t, f.requests())
	require.Equal(t, []sas.ProcessState{sas.Compensated, sas.Compensated, sas.Pending}, f.states("o-late"))
	require.Contains(t, statusList(f.statuses()), "compensated#15000")
}

// When the refusal's delivery stopped after its write (before its
// compensation), the late success starts the compensation itself (it notes
// the effect and claims the step's undo); if that delivery stops before the
// undo's request goes out, its redelivery sends it: nothing else would, the
// supervisor waiting for a request that may be queued until its delivery
// horizon (the simulator's deep sweep seed 30880).
func TestARedeliveredLateSuccessSendsTheUndoItClaimed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	charge := f.runForward("o-late-undo", "order", 1)
	_, err := f.mem.Fail(f.ctx, sas.FailParams{Key: sas.StepKey{OrderID: "o-late-undo", Step: 1}, Owner: charge.LockedBy,
		Attempt: charge.Attempt, Now: f.clock.Now(), Reason: "declined (not stored)"}) // its delivery then died
	require.NoError(t, err)
	ev := f.event(done(charge)) // the twin request's success
	f.failEntries(func(url, body string) bool {
		var r sas.AgentRequest
		return url == f.agentURL && json.Unmarshal([]byte(body), &r) == nil && r.Compensation
	})
	require.Len(t, f.handle(ev), 1, "the undo's request failed to send: the success is redelivered")
	f.failEntries(nil)
	r := f.step("o-late-undo", 1)
	require.Equal(t, sas.Compensating, r.ProcessState, "the late success claimed the step's undo")
	require.True(t, r.UndoOwed)
	require.Empty(t, f.requests())

	require.Empty(t, f.handle(ev))
	undo := f.request()
	require.Equal(t, 1, undo.Step, "the undo claimed and never sent is sent")
	require.True(t, undo.Compensation)
	require.Equal(t, "o-late-undo:1:undo", undo.IdempotencyKey)
}

// The same for a first step: nothing else to undo, its own undo still goes.
func TestSuccessAfterRefusalOfAFirstStep(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-late1", "order", f.replyURL))
	reserve := f.request()
	f.deliver(reply(reserve, sas.OutcomeFailed, "no stock (not stored)"))
	undo := f.request()
	require.Equal(t, 0, undo.Step)
	require.True(t, undo.Compensation)

	f.deliver(done(reserve))
	require.Empty(t, f.requests(), "its undo is running")
	f.deliver(done(undo))
	require.Equal(t, []sas.ProcessState{sas.Compensated, sas.Pending, sas.Pending}, f.states("o-late1"))
}

// A remote that stores refusals replays them for the same key forever. An
// operator's resubmit of a refused step starts a new key generation; a step
// whose effect may exist keeps its key, so the remote replays the success.
func TestResubmitStartsANewKeyGeneration(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// A step with no undo: a refusal leaves it in Error for an operator (a
	// step with one is undone, refusal or not).
	reg, err := sas.NewRegistry(sas.Workflow{Name: "notify", Steps: []sas.StepDef{
		{Name: "notify", Agent: "payments", Action: "POST /notifications", Timeout: 30 * time.Second}}})
	require.NoError(t, err)
	f.h = schedulerHandler(f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL}))
	f.deliver(intake("o-gen", "notify", ""))
	req := f.request()
	require.Equal(t, "o-gen:0", req.IdempotencyKey)
	f.deliver(reply(req, sas.OutcomeFailed, "card expired"))
	rec := f.step("o-gen", 0)
	require.True(t, rec.Refused)

	now := f.clock.Now()
	got, err := f.mem.Resubmit(f.ctx, sas.ResubmitParams{Key: rec.Key(), Attempt: rec.Attempt, Now: now, PickupBy: now.Add(time.Minute), Actor: "operator", Reason: "card updated"})
	require.NoError(t, err)
	require.Equal(t, 1, got.Generation)
	require.False(t, got.Refused)
	f.deliver(retryMsg("o-gen", 0, got.Attempt))
	again := f.request()
	require.Equal(t, "o-gen:0:g1", again.IdempotencyKey)
	f.deliver(done(again))
	require.Equal(t, []sas.ProcessState{sas.Processed}, f.states("o-gen"))
}

func TestResubmitKeepsTheKeyOfAnEffectThatMayExist(t *testing.T) {
	t.Parallel()
	now := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	r := sas.StepRecord{OrderID: "o-gen2", ProcessState: sas.Error, Attempt: 1, Refused: true, UndoOwed: true}
	got, err := sas.Resubmit(r, sas.ResubmitParams{Key: r.Key(), Attempt: 1, Now: now, PickupBy: now.Add(time.Minute), Actor: "operator"})
	require.NoError(t, err)
	require.Equal(t, 0, got.Generation, "the same key: the remote replays its stored success")
	r.UndoOwed = false
	got, err = sas.Resubmit(r, sas.ResubmitParams{Key: r.Key(), Attempt: 1, Now: now, PickupBy: now.Add(time.Minute), Actor: "operator"})
	require.NoError(t, err)
	require.Equal(t, 1, got.Generation, "refused and nothing took effect: a new key")
}

// An agent that gave up on a request without an outcome after its last
// delivery hands it back (retry{requeue}, docs/protocol.md "Waiting is not
// executing"): the scheduler sends the same request again while its attempt
// is the step's current, held one, even past its deadline, and drops it
// otherwise, so a stale attempt never adds a request.
func TestRequeueResendsOnlyTheCurrentAttempt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-rq", "order", f.replyURL))
	req := f.request()
	requeue := func(attempt int) string {
		return sas.Encode(sas.Retry{V: sas.MessageVersion, Kind: sas.KindRetry, OrderID: "o-rq", Step: 0, Attempt: attempt,
			Reason: "no outcome after 3 deliveries", Requeue: true, Sig: req.Sig})
	}

	f.clock.Advance(time.Hour) // far past the lease's deadline: still the current attempt
	// Only with the request's signature (docs/trust.md): a requeue anyone
	// on the scheduler queue could forge adds no request.
	unsigned := sas.Encode(sas.Retry{V: sas.MessageVersion, Kind: sas.KindRetry, OrderID: "o-rq", Step: 0, Attempt: req.Attempt, Requeue: true})
	f.deliver(unsigned)
	require.Empty(t, f.requests(), "an unsigned requeue")
	f.deliver(requeue(req.Attempt))
	again := f.request()
	require.Equal(t, req.Attempt, again.Attempt)
	require.Equal(t, req.LockedBy, again.LockedBy)
	require.Equal(t, req.IdempotencyKey, again.IdempotencyKey)
	require.Equal(t, req.TimeoutMs, again.TimeoutMs)
	require.Equal(t, []sas.ProcessState{sas.Processing, sas.Pending, sas.Pending}, f.states("o-rq"), "nothing written")

	f.deliver(requeue(req.Attempt + 1)) // an attempt that never existed
	require.Empty(t, f.requests())

	f.rescue("o-rq", 0)
	f.deliver(requeue(req.Attempt)) // the attempt was taken back
	require.Empty(t, f.requests(), "a stale attempt adds no request")

	f.deliver(done(again)) // and its reply is fenced out as before
	require.Equal(t, sas.Pending, f.step("o-rq", 0).ProcessState)
}

// A success that arrives after its step was undone. With one key (no
// resubmit), the success is that key's one effect and the undo was sent for
// the same key: it reversed the effect, or (reaching the remote first)
// cancelled it, since a remote's undo must commute with what it undoes. No
// alert. After a resubmit the step has had two keys and the reply does not
// say which, so an operator is told.
func TestSuccessAfterTheUndo(t *testing.T) {
	t.Parallel()
	t.Run("one key: the undo covers it", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		charge := f.runForward("o-after", "order", 1)
		f.deliver(done(charge))
		ship := f.request()
		f.deliver(reply(ship, sas.OutcomeFailed, "no carrier"))
		f.deliver(done(f.request())) // undo charge
		f.deliver(done(f.request())) // undo reserve
		require.Equal(t, []sas.ProcessState{sas.Compensated, sas.Compensated, sas.Error}, f.states("o-after"))
		alerts := len(f.alerts.all())
		before := f.view("o-after")

		f.deliver(done(charge)) // a late duplicate of the charge's success
		require.Empty(t, f.requests())
		require.Len(t, f.alerts.all(), alerts, "no alert")
		require.Equal(t, before.Steps, f.view("o-after").Steps, "nothing written")
	})
	t.Run("after a resubmit: an operator is told", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		f.deliver(intake("o-after2", "order", f.replyURL))
		reserve1 := f.request()
		// The refusal's handler dies before its compensation claims the
		// step (its alert fails), and an operator resubmits the step in
		// Error meanwhile.
		f.alerts.mu.Lock()
		f.alerts.fail = 1
		f.alerts.mu.Unlock()
		require.Len(t, f.handle(f.event(reply(reserve1, sas.OutcomeFailed, "no stock (not stored)"))), 1)
		rec := f.step("o-after2", 0)
		require.Equal(t, sas.Error, rec.ProcessState)
		now := f.clock.Now()
		res, err := f.mem.Resubmit(f.ctx, sas.ResubmitParams{Key: rec.Key(), Attempt: rec.Attempt, Now: now, PickupBy: now.Add(time.Minute), Actor: "operator"})
		require.NoError(t, err)
		require.Equal(t, 1, res.Generation)
		f.deliver(retryMsg("o-after2", 0, res.Attempt))
		reserve2 := f.request()
		require.Equal(t, "o-after2:0:g1", reserve2.IdempotencyKey)
		f.deliver(done(reserve2))
		f.deliver(reply(f.request(), sas.OutcomeFailed, "card declined"))
		refund := f.request()
		require.Equal(t, "o-after2:1:undo", refund.IdempotencyKey, "the refused charge's undo first")
		f.deliver(done(refund))
		undo := f.request()
		require.Equal(t, "o-after2:0:g1:undo", undo.IdempotencyKey)
		require.Equal(t, []string{"o-after2:0:undo"}, undo.PriorKeys, "the undo undoes generation 0's key too")
		f.deliver(done(undo))
		require.Equal(t, sas.Compensated, f.step("o-after2", 0).ProcessState)
		alerts := len(f.alerts.all())

		f.deliver(done(reserve1)) // generation 0's success, late
		got := f.alerts.all()
		require.Len(t, got, alerts+1, "one alert: the effect under the older key")
		require.Contains(t, got[len(got)-1].Reason, "after the step was resubmitted as generation 1")
		f.deliver(done(reserve1)) // its redelivery pages under the same id
		again := f.alerts.all()
		require.Equal(t, got[len(got)-1].ID, again[len(again)-1].ID)
	})
}
