package scheduler_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
)

// The protocol holes of issue 29 §1, each replayed as its sequence against
// the real scheduler (docs/simulation.md lists where each is held).

// notifyFixture is a fixture whose one workflow, "notify", is a single
// step with no undo: a refusal leaves it in Error for an operator, and a
// resubmit of it starts a new key generation.
func notifyFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	reg, err := sas.NewRegistry(sas.Workflow{Name: "notify", Steps: []sas.StepDef{
		{Name: "notify", Agent: "payments", Action: "POST /notifications", Timeout: stepTimeout}}})
	require.NoError(t, err)
	f.h = schedulerHandler(f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL}))
	return f
}

// resubmit is an operator's resubmit of a step in Error, as sasctl makes it.
func (f *fixture) resubmit(id string, step int) sas.StepRecord {
	f.t.Helper()
	rec := f.step(id, step)
	now := f.clock.Now()
	got, err := f.mem.Resubmit(f.ctx, sas.ResubmitParams{Key: rec.Key(), Attempt: rec.Attempt, Now: now,
		PickupBy: now.Add(time.Minute), Actor: "operator", Reason: "fixed"})
	require.NoError(f.t, err)
	return got
}

// requeueOf is an agent's hand-back of req after three deliveries without
// an outcome: signed with the request's own signature.
func requeueOf(req sas.AgentRequest) string {
	return sas.Encode(sas.Retry{V: sas.MessageVersion, Kind: sas.KindRetry, OrderID: req.OrderID, Step: req.Step,
		Attempt: req.Attempt, Reason: "no outcome after 3 deliveries", Requeue: true, Sig: req.Sig, Trace: req.Trace})
}

// N1 (F-7): a request of a resubmitted step (generation 1) handed back by
// its agent is a request the scheduler sent: it goes out again, the same
// request, rather than being dropped as forged.
func TestN1AHandedBackRequestOfANewGenerationIsSentAgain(t *testing.T) {
	t.Parallel()
	f := notifyFixture(t)
	f.deliver(intake("o-n1", "notify", ""))
	f.deliver(reply(f.request(), sas.OutcomeFailed, "card expired"))
	got := f.resubmit("o-n1", 0)
	require.Equal(t, 1, got.Generation)
	f.deliver(retryMsg("o-n1", 0, got.Attempt))
	req := f.request()
	require.Equal(t, 1, req.Generation)

	f.deliver(requeueOf(req))
	again := f.requests()
	require.Len(t, again, 1, "the handed-back request goes out again")
	require.Equal(t, req.IdempotencyKey, again[0].IdempotencyKey)
	require.Equal(t, req.Sig, again[0].Sig, "the same request, under the same signature")
	f.deliver(done(again[0]))
	require.Equal(t, []sas.ProcessState{sas.Processed}, f.states("o-n1"))
}

// N5: two events never share an id. A refused step is alerted (and its
// failure posted); an operator resubmits it; the supervisor gives the
// resubmitted step up before any scheduler claimed it (its pick-up
// deadline passed). That give-up is another event: its alert and its
// failure status must not carry the refusal's id and sequence number, or a
// pipeline that drops repeats by id never pages it.
func TestN5AGiveUpAfterAResubmitIsANewEvent(t *testing.T) {
	t.Parallel()
	f := notifyFixture(t)
	f.deliver(intake("o-n5", "notify", f.replyURL))
	f.statuses()
	f.deliver(reply(f.request(), sas.OutcomeFailed, "card expired"))
	alerts := f.alerts.all()
	require.Len(t, alerts, 1)
	failed := f.statuses()
	require.Len(t, failed, 1)

	f.resubmit("o-n5", 0)
	f.clock.Advance(2 * time.Minute) // past the pick-up deadline, no retry ever came
	gaveUp := f.giveUp("o-n5", 0)
	require.Equal(t, sas.Error, gaveUp.ProcessState)
	owed := gaveUp.OwedAlert("supervisor")
	require.NotEqual(t, alerts[0].ID, owed.ID, "the give-up is not the refusal")

	// The compensate the give-up owes tells the submitter of the failure.
	f.deliver(compensateMsg("o-n5"))
	again := f.statuses()
	require.Len(t, again, 1)
	require.Equal(t, sas.StatusFailed, again[0].Status)
	require.NotEqual(t, failed[0].Sequence, again[0].Sequence, "a second failure, a second sequence number")
}

// resubmittedAndDone makes an operator's resubmit of a refused step, and
// the resubmitted step's success, land right after the scheduler reads
// the order to plan the refusal's compensation: when the plan's claim is
// made, the order is Processed.
// With afterNote, it lands right after a late success's NoteEffect
// instead, before the read that follows it.
type resubmittedAndDone struct {
	sas.StateStore
	clock     interface{ Now() time.Time }
	step      int
	afterNote bool
	done      bool
}

func (s *resubmittedAndDone) GetOrder(ctx context.Context, id string) (sas.OrderView, error) {
	v, err := s.StateStore.GetOrder(ctx, id)
	if err != nil || s.afterNote || s.done || len(v.Steps) <= s.step || v.Steps[s.step].ProcessState != sas.Error {
		return v, err
	}
	return v, s.resubmitAndComplete(ctx, v.Steps[s.step])
}

func (s *resubmittedAndDone) NoteEffect(ctx context.Context, p sas.NoteEffectParams) (sas.StepRecord, error) {
	r, err := s.StateStore.NoteEffect(ctx, p)
	if err != nil || !s.afterNote || s.done || p.Key.Step != s.step || r.ProcessState != sas.Error {
		return r, err
	}
	return r, s.resubmitAndComplete(ctx, r)
}

func (s *resubmittedAndDone) resubmitAndComplete(ctx context.Context, r sas.StepRecord) error {
	s.done = true
	now := s.clock.Now()
	res, err := s.StateStore.Resubmit(ctx, sas.ResubmitParams{Key: r.Key(), Attempt: r.Attempt, Now: now, PickupBy: now.Add(time.Minute), Actor: "operator"})
	if err != nil {
		return err
	}
	c, err := s.StateStore.Claim(ctx, sas.ClaimParams{Key: r.Key(), Attempt: res.Attempt, Owner: "scheduler-2", Now: now, CompleteBy: now.Add(time.Minute)})
	if err != nil {
		return err
	}
	_, err = s.StateStore.Complete(ctx, sas.CompleteParams{Key: r.Key(), Owner: "scheduler-2", Attempt: c.Attempt, Now: now})
	return err
}

// N2: a compensation starts only from a state that still calls for it,
// checked in the same write. The ship step is refused; its handler reads
// the order to plan the compensation (undo the charge, then the
// reservation); meanwhile an operator resubmits the ship step and it
// completes. The undo claim, fenced on the order as read, loses; the plan
// made again finds no failed step, so nothing is undone: the order is
// Processed, and stays so.
func TestN2NoCompensationOfAnOrderThatCompletedMeanwhile(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	st := &resubmittedAndDone{StateStore: f.calls, clock: f.clock, step: 2}
	svc := f.newServiceConfig(owner, mustDefault(t), sas.AgentQueues{Default: f.agentURL}, func(c *scheduler.Config) { c.Store = st })
	f.h = scheduler.NewHandler(svc)

	ship := f.runForward("o-n2", "order", 2)
	require.Equal(t, 2, ship.Step)
	f.deliver(reply(ship, sas.OutcomeFailed, "no carrier"))
	require.True(t, st.done, "the resubmitted ship step completed between the plan's read and its claim")
	for _, r := range f.requests() {
		require.False(t, r.Compensation, "no undo of a completed order: %+v", r)
	}
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processed, sas.Processed}, f.states("o-n2"))
}

// N2, the late-success path: the reservation is refused and its handler
// dies before compensating (its alert fails); the twin delivery's success
// arrives late and is noted (UndoOwed) on the step in Error; between that
// write and the read that plans the compensation, an operator resubmits
// the step (under the same key, its effect may exist) and it completes.
// The plan finds no failed step: the reservation is not undone under an
// order that runs on.
func TestN2NoCompensationAfterALateSuccessOfAResubmittedStep(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	st := &resubmittedAndDone{StateStore: f.calls, clock: f.clock, step: 0, afterNote: true}
	svc := f.newServiceConfig(owner, mustDefault(t), sas.AgentQueues{Default: f.agentURL}, func(c *scheduler.Config) { c.Store = st })
	f.h = scheduler.NewHandler(svc)

	f.deliver(intake("o-n2l", "order", f.replyURL))
	reserve := f.request()
	f.alerts.mu.Lock()
	f.alerts.fail = 1
	f.alerts.mu.Unlock()
	require.Len(t, f.handle(f.event(reply(reserve, sas.OutcomeFailed, "no stock (not stored)"))), 1, "the refusal's handler fails")
	require.Equal(t, sas.Error, f.step("o-n2l", 0).ProcessState)

	f.deliver(done(reserve)) // the twin's success, late
	require.True(t, st.done, "the resubmitted reservation completed between the note and the plan's read")
	for _, r := range f.requests() {
		require.False(t, r.Compensation, "no undo of a step that completed: %+v", r)
	}
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Pending, sas.Pending}, f.states("o-n2l"))
}

// renewalFixture is a scheduler whose control and scheduler queues are
// real (in memory), so that renewed copies can be read back.
func renewalFixture(t *testing.T) (f *fixture, h *scheduler.Handler, control, sched string) {
	t.Helper()
	f = newFixture(t)
	mk := func(name string) string {
		q, err := f.q.CreateQueue(f.ctx, sas.CreateQueueParams{Name: name})
		require.NoError(t, err)
		return q.URL
	}
	control, sched = mk("sas-control"), mk("sas-scheduler")
	svc := f.newServiceConfig(owner, mustDefault(t), sas.AgentQueues{Default: f.agentURL}, func(c *scheduler.Config) {
		c.ControlQueueURL, c.SchedulerQueueURL = control, sched
	})
	return f, scheduler.NewHandler(svc), control, sched
}

// onReceive is body as the queue named delivers it for the receives-th time.
func onReceive(queue, body, receives string) events.SQSEvent {
	return events.SQSEvent{Records: []events.SQSMessage{{
		MessageId: "m-" + receives, Body: body, EventSource: "aws:sqs",
		EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:" + queue,
		Attributes:     map[string]string{"ApproximateReceiveCount": receives, "SenderId": "AROAEXAMPLE:supervisor"},
	}}}
}

// N6: a compensate on the control queue that fails through a store outage
// is renewed before the dead-letter queue, as intake and scheduler-queue
// messages are, and handled once the store is back.
func TestN6AControlMessageIsRenewedBeforeTheDLQ(t *testing.T) {
	t.Parallel()
	f, h, control, _ := renewalFixture(t)
	f.deliver(intake("o-n6", "payment", f.replyURL))
	f.deliver(reply(f.request(), sas.OutcomeFailed, "declined"))
	f.requests()
	f.store.mu.Lock()
	f.store.fail["o-n6"] = errors.New("dynamodb: service unavailable")
	f.store.mu.Unlock()

	body := compensateMsg("o-n6")
	require.Len(t, f.handleWith(h, onReceive("sas-control", body, "2")), 1, "the outage fails it")
	require.Empty(t, f.handleWith(h, onReceive("sas-control", body, "4")), "its last receives: acknowledged once renewed")
	copies := f.drain(control)
	require.Len(t, copies, 1, "a fresh copy on the control queue")
	require.Contains(t, copies[0], `"sasSender":"AROAEXAMPLE:supervisor"`, "who sent it first, for the compensate's actor")

	f.store.mu.Lock()
	delete(f.store.fail, "o-n6")
	f.store.mu.Unlock()
	require.Empty(t, f.handleWith(h, onReceive("sas-control", copies[0], "1")), "the copy is handled as the compensate it is")
}

// F-8: the renewal count is the scheduler's, signed: a sender that writes
// its own (a negative one, to be renewed for ever, or one with a made-up
// signature) gets no renewal, and its message goes the way of any failing
// message; the scheduler's own copies are renewed MaxRenewals times.
func TestF8ASenderCannotSetTheRenewalCount(t *testing.T) {
	t.Parallel()
	f, h, _, sched := renewalFixture(t)
	bare := sas.Encode(sas.AgentReply{V: sas.MessageVersion, Kind: sas.KindAgentReply, OrderID: "o-none", Step: 0, Attempt: 1, LockedBy: "x", Outcome: sas.OutcomeDone})
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(bare), &m))
	for name, fields := range map[string]map[string]string{
		"negative":         {"sasRenewals": "-1000000"},
		"unsigned":         {"sasRenewals": "0"},
		"made-up":          {"sasRenewals": "1", "sasRenewalSig": `"v1.AAAA"`},
		"another's copy":   {"sasRenewals": "1", "sasRenewalSig": `"v1.` + strings.Repeat("A", 43) + `"`},
		"beyond the bound": {"sasRenewals": "99"},
	} {
		forged := maps.Clone(m)
		for k, v := range fields {
			forged[k] = json.RawMessage(v)
		}
		b, err := json.Marshal(forged)
		require.NoError(t, err)
		require.Empty(t, f.handleWith(h, onReceive("sas-scheduler", string(b), "4")), name)
		require.Empty(t, f.drain(sched), "%s: not renewed", name)
	}

	body := bare
	for n := 1; n <= scheduler.MaxRenewals; n++ {
		require.Empty(t, f.handleWith(h, onReceive("sas-scheduler", body, "4")))
		copies := f.drain(sched)
		require.Len(t, copies, 1, "renewal %d", n)
		body = copies[0]
		if n == 1 {
			// The first sender is signed with the count: rewritten, the
			// copy is renewed no more.
			rewritten := strings.Replace(body, `"sasSender":"AROAEXAMPLE:supervisor"`, `"sasSender":"AROAEXAMPLE:operator"`, 1)
			require.NotEqual(t, body, rewritten)
			require.Empty(t, f.handleWith(h, onReceive("sas-scheduler", rewritten, "4")))
			require.Empty(t, f.drain(sched), "a rewritten sender: not renewed")
		}
	}
	require.Empty(t, f.handleWith(h, onReceive("sas-scheduler", body, "4")))
	require.Empty(t, f.drain(sched), "renewed MaxRenewals times: handled as it is")
}

// N4: a resubmit of a refused step runs it under a new key, and a refusal
// is not proof of no effect. When the resubmitted step completes, its
// order stands with an effect under the new key and, if a twin of the
// refused request succeeded, one under the old key that nothing undoes:
// an operator is told, once per generation (docs/decisions.md). A step
// that never changed keys is not alerted on.
func TestN4ACompletedNewGenerationIsAlerted(t *testing.T) {
	t.Parallel()
	f := notifyFixture(t)
	f.deliver(intake("o-n4", "notify", ""))
	f.deliver(reply(f.request(), sas.OutcomeFailed, "card expired"))
	require.Len(t, f.alerts.all(), 1, "the refusal")
	got := f.resubmit("o-n4", 0)
	f.deliver(retryMsg("o-n4", 0, got.Attempt))
	req := f.request()
	require.Equal(t, "o-n4:0:g1", req.IdempotencyKey)
	f.deliver(done(req))
	alerts := f.alerts.all()
	require.Len(t, alerts, 2)
	require.Equal(t, "o-n4/0/regen/g1", alerts[1].ID)
	require.Contains(t, alerts[1].Reason, "after it was refused under o-n4:0")
	f.deliver(done(req)) // redelivered: the same event, the same id
	require.Equal(t, alerts[1].ID, f.alerts.all()[len(f.alerts.all())-1].ID)

	f.deliver(intake("o-n4b", "notify", ""))
	f.deliver(done(f.request()))
	for _, a := range f.alerts.all() {
		require.NotEqual(t, "o-n4b", a.OrderID, "a step under its first key is not alerted on")
	}
}

// N2, the supervisor's side (the simulator's seed 8401): a give-up's
// compensate names the give-up, and is held to the rule of every automatic
// compensation. Redelivered after the operator resubmitted the step and
// the order completed, it undoes nothing; an operator's compensate, which
// names no give-up, still undoes the completed order.
func TestN2AGiveUpsCompensateRedeliveredAfterTheOrderCompletedUndoesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-8401", "payment", ""))
	f.deliver(done(f.request()))
	require.Equal(t, []sas.ProcessState{sas.Processed}, f.states("o-8401"))

	owed := sas.StepRecord{OrderID: "o-8401", Attempt: 1, StepName: "charge", LastError: "stuck"}.OwedCompensate("supervisor-1")
	require.NotNil(t, owed.GivenUp, "a give-up's compensate names the give-up")
	f.deliver(sas.Encode(owed))
	require.Equal(t, []sas.ProcessState{sas.Processed}, f.states("o-8401"), "no undo of a completed order")
	for _, r := range f.requests() {
		require.False(t, r.Compensation, "no undo request: %+v", r)
	}

	f.deliver(compensateMsg("o-8401")) // an operator's: explicit
	require.Equal(t, []sas.ProcessState{sas.Compensating}, f.states("o-8401"))
}

// N6, settle after the claim: a give-up's compensate request stays owed
// after the supervisor sent it, until the compensation it asks for starts.
// When the compensation claims the given-up step's own undo, the claim
// settles it; when there is nothing of that step to claim (no undo, here),
// the scheduler settles it itself once it has handled the request, so the
// supervisor does not send it again. A redelivery changes nothing more.
func TestN6AGiveUpIsSettledOnceItsCompensationStarted(t *testing.T) {
	t.Parallel()
	f := notifyFixture(t)
	f.deliver(intake("o-n6", "notify", ""))
	f.request()
	f.clock.Advance(leaseTime + time.Second) // past the claim's deadline: pick-up allowance and timeout
	r := f.giveUp("o-n6", 0)
	require.Equal(t, sas.Error, r.ProcessState)
	require.True(t, r.OwesCompensate())

	owed := r.OwedCompensate("supervisor-1")
	f.deliver(sas.Encode(owed))
	after := f.step("o-n6", 0)
	require.Equal(t, sas.Error, after.ProcessState, "nothing to undo: an operator's step")
	require.Empty(t, after.Owes, "handled: the give-up owes nothing more")

	f.deliver(sas.Encode(owed)) // the supervisor's re-send, or a redelivery
	require.Empty(t, f.step("o-n6", 0).Owes)
	require.Equal(t, sas.Error, f.step("o-n6", 0).ProcessState)
}
