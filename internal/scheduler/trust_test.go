package scheduler_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
)

// The trust rules (docs/trust.md): whoever can send to the scheduler queue
// (every agent's role) can report the outcome of the requests it received,
// and nothing more: it cannot create, undo or rewrite orders.

// An intake sent to the scheduler queue or the control queue creates
// nothing and tells nobody (a rejection would let it aim statuses anywhere
// the allow-list allows); the same order on the intake queue goes through.
func TestIntakeOnlyFromTheIntakeQueue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, arn := range []string{schedulerARN, controlARN} {
		ev := f.event(intake("o-smuggled", "payment", f.replyURL), `{"v":1,"kind":"intake","orderId":"o-smuggled2","workflow":"payment"}`)
		for i := range ev.Records {
			ev.Records[i].EventSourceARN = arn
		}
		require.Empty(t, f.handle(ev), "dropped, not retried")
		f.requireNoOrder("o-smuggled")
		f.requireNoOrder("o-smuggled2")
		require.Empty(t, f.requests())
		require.Empty(t, f.statuses())
	}
	f.deliver(intake("o-smuggled", "payment", f.replyURL))
	require.Equal(t, []sas.ProcessState{sas.Processing}, f.states("o-smuggled"))
}

// A reply whose echo was rewritten under the request's signature is
// dropped before any write: the next step never sees the rewritten
// payload, workflow, version, lane or replyTo. The holder's genuine reply,
// in the same batch, goes through.
func TestARewrittenEchoIsNeverUsed(t *testing.T) {
	t.Parallel()
	for name, rewrite := range map[string]func(*sas.AgentRequest){
		"payload":  func(r *sas.AgentRequest) { r.Payload = json.RawMessage(`{"amount":999999,"iban":"ATTACKER"}`) },
		"workflow": func(r *sas.AgentRequest) { r.Workflow = "payment" },
		"version":  func(r *sas.AgentRequest) { r.Version = "0000000000000000" },
		"replyTo":  func(r *sas.AgentRequest) { r.ReplyTo = "http://memqueue.local/000000000000/caller2" },
		"priority": func(r *sas.AgentRequest) { r.Priority = 9 },
		"holder":   func(r *sas.AgentRequest) { r.LockedBy = "scheduler-other" },
		"attempt":  func(r *sas.AgentRequest) { r.Attempt = 2 },
		"step":     func(r *sas.AgentRequest) { r.Step, r.StepName = 1, "charge" },
		"leg":      func(r *sas.AgentRequest) { r.Compensation = true },
		"agent":    func(r *sas.AgentRequest) { r.Agent = "shipping" },
		"signature": func(r *sas.AgentRequest) {
			r.Sig = r.Sig[:len(r.Sig)-2] + "AA"
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.deliver(intake("o-rw", "order", f.replyURL))
			req := f.request()
			f.statuses()
			forged := req
			rewrite(&forged)
			f.calls.take()

			f.deliver(done(forged))
			calls, _ := f.calls.take()
			require.Empty(t, calls, "no write, no read")
			require.Empty(t, f.requests())
			require.Empty(t, f.statuses())
			require.Empty(t, f.statusesAt(f.otherURL))
			require.Equal(t, []sas.ProcessState{sas.Processing, sas.Pending, sas.Pending}, f.states("o-rw"))

			// The forged reply again, beside the genuine one, in one batch.
			f.deliver(done(forged), done(req))
			next := f.request()
			require.Equal(t, 1, next.Step)
			require.JSONEq(t, `{"amount":42,"currency":"EUR"}`, string(next.Payload), "the stored payload, not the rewritten one")
			require.Equal(t, "order", next.Workflow)
			require.Equal(t, 0, next.Priority)
			require.Equal(t, f.replyURL, next.ReplyTo)
			require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processing, sas.Pending}, f.states("o-rw"))
		})
	}
}

// A reply without a signature (an agent built before signatures) is
// handled from the store: its echo is thrown away, so a rewritten payload
// never reaches the next step; it costs one read. A deployment that
// requires signatures drops it.
func TestAnUnsignedReplyIsHandledFromTheStore(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-un", "order", f.replyURL))
	req := f.request()
	forged := req
	forged.Sig = ""
	forged.Payload = json.RawMessage(`{"amount":999999,"iban":"ATTACKER"}`)
	forged.ReplyTo, forged.Priority = f.otherURL, 9
	f.calls.take()

	f.deliver(done(forged))
	calls, _ := f.calls.take()
	require.Equal(t, map[string]int{"GetOrder": 1, "Complete": 1}, calls)
	next := f.request()
	require.JSONEq(t, `{"amount":42,"currency":"EUR"}`, string(next.Payload))
	require.Equal(t, f.replyURL, next.ReplyTo)
	require.Equal(t, 0, next.Priority)
	require.Empty(t, f.statusesAt(f.otherURL))

	// Required: dropped, nothing read or written.
	svc := f.newServiceStrict("scheduler-strict")
	unsigned := next
	unsigned.Sig = ""
	f.calls.take()
	require.Empty(t, f.handleWith(scheduler.NewHandler(svc), f.event(done(unsigned))))
	calls, _ = f.calls.take()
	require.Empty(t, calls)
	require.Equal(t, sas.Processing, f.step("o-un", 1).ProcessState)
}

// Retries and compensations are taken from the control queue alone: sent
// to the scheduler queue (or the intake queue) they do nothing, while the
// messages beside them in the batch proceed.
func TestRetryAndCompensateOnlyFromTheControlQueue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.runForward("o-done", "payment", 1) // settled: a compensate would undo it
	f.deliver(intake("o-held", "payment", f.replyURL))
	held := f.request()
	f.clock.Advance(leaseTime + 1)
	f.rescue("o-held", 0) // Pending: a retry would claim it
	f.statuses()
	doneBefore, heldBefore := f.view("o-done").Steps, f.view("o-held").Steps

	f.deliver(intake("o-next", "payment", f.replyURL))
	other := f.request()
	ev := f.event(compensateMsg("o-done"), retryMsg("o-held", 0, held.Attempt), done(other))
	for i := range ev.Records {
		ev.Records[i].EventSourceARN = schedulerARN
	}
	require.Empty(t, f.handle(ev))
	require.Equal(t, doneBefore, f.view("o-done").Steps, "nothing undone")
	require.Equal(t, heldBefore, f.view("o-held").Steps, "nothing claimed")
	require.Empty(t, f.requests(), "no undo, no retried request")
	require.Equal(t, []sas.ProcessState{sas.Processed}, f.states("o-next"), "the reply beside them went through")

	// The same messages from the control queue are obeyed.
	f.deliver(compensateMsg("o-done"), retryMsg("o-held", 0, held.Attempt))
	reqs := f.requests()
	require.Len(t, reqs, 2)
	require.Equal(t, []sas.ProcessState{sas.Compensating}, f.states("o-done"))
	require.Equal(t, []sas.ProcessState{sas.Processing}, f.states("o-held"))
}

// Service.HandleMessage takes the message's origin, as the handler reads it
// from the record.
func TestHandleMessageTakesTheOrigin(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var de *scheduler.DropError
	require.ErrorAs(t, f.svc.HandleMessage(f.ctx, scheduler.Origin{Source: scheduler.FromAgents}, []byte(intake("o-hm", "payment", ""))), &de)
	f.requireNoOrder("o-hm")
	require.NoError(t, f.svc.HandleMessage(f.ctx, scheduler.Origin{Source: scheduler.FromIntake}, []byte(intake("o-hm", "payment", ""))))
	require.Equal(t, []sas.ProcessState{sas.Processing}, f.states("o-hm"))
	f.deliver(done(f.request()))
	err := f.svc.HandleMessage(f.ctx, scheduler.Origin{Source: scheduler.FromAgents, SenderID: "AROAAGENT:payments"}, []byte(compensateMsg("o-hm")))
	require.ErrorAs(t, err, &de)
	require.Contains(t, de.Reason, "only the control queue takes it")
	require.NoError(t, f.svc.HandleMessage(f.ctx, scheduler.Origin{Source: scheduler.FromControl, SenderID: "AROAOPERATOR:alice"}, []byte(compensateMsg("o-hm"))))
	require.Equal(t, []sas.ProcessState{sas.Compensating}, f.states("o-hm"))
}

// Reasons are bounded wherever they are carried: a long agent reason is
// cut in the record, its history, the alert and the status; an intake
// naming a huge workflow gets a rejection that fits.
func TestReasonsAreBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-long", "payment", f.replyURL))
	f.statuses()
	long := strings.Repeat("x", 100_000)
	f.deliver(reply(f.request(), sas.OutcomeFailed, long))
	r := f.step("o-long", 0)
	require.LessOrEqual(t, len(r.LastError), sas.MaxReasonBytes)
	require.Contains(t, r.LastError, "[cut: 100000 bytes]")
	for _, h := range f.view("o-long").History {
		require.LessOrEqual(t, len(h.Reason), sas.MaxReasonBytes)
	}
	for _, a := range f.alerts.all() {
		require.LessOrEqual(t, len(a.Reason), sas.MaxReasonBytes)
	}
	st := f.statuses()
	require.NotEmpty(t, st)
	for _, s := range st {
		require.LessOrEqual(t, len(s.Reason), sas.MaxReasonBytes)
	}

	f.deliver(`{"v":1,"orderId":"o-wf","workflow":"` + strings.Repeat("w", 120_000) + `","replyTo":"` + f.replyURL + `"}`)
	st = f.statuses()
	require.Len(t, st, 1)
	require.Equal(t, sas.StatusRejected, st[0].Status)
	require.LessOrEqual(t, len(st[0].Reason), sas.MaxReasonBytes)
}

// Who compensated an order, and why, is recorded with it (issue 29, F-6):
// the undo's claim writes the compensate's sender, as the control queue
// names it (never the actor it declares), and its reason into the step's
// history, where the console and sasctl show read it.
func TestCompensateRecordsWhoAndWhy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-who", "payment", ""))
	f.deliver(done(f.request()))
	body := sas.Encode(sas.Compensate{V: sas.MessageVersion, Kind: sas.KindCompensate, OrderID: "o-who",
		Reason: "customer cancelled", Actor: "operator:someone-else"})
	require.NoError(t, f.svc.HandleMessage(f.ctx, scheduler.Origin{Source: scheduler.FromControl, SenderID: "AROAOPERATOR:alice"}, []byte(body)))
	require.Equal(t, []sas.ProcessState{sas.Compensating}, f.states("o-who"))
	var claim *sas.HistoryEntry
	for _, h := range f.view("o-who").History {
		if h.To == sas.Compensating {
			claim = &h
		}
	}
	require.NotNil(t, claim, "the undo's claim is in the history")
	require.Equal(t, "compensation claimed, requested by sender:AROAOPERATOR:alice: customer cancelled", claim.Reason)
	require.NotContains(t, claim.Reason, "someone-else", "the declared actor is not believed")
}
