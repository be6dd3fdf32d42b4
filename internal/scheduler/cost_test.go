package scheduler_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// Store calls per message are the cost of an order (docs/protocol.md,
// "Scheduler"; the table in doc.go). The happy path must read nothing: the
// agent echoes the order's workflow, payload and replyTo, so a reply is one
// fenced write. These tests hold the scheduler to that, call by call.

// A single-step order: intake is one Submit (order + step created already
// claimed: one TransactWriteItems), the done reply one Complete (one
// UpdateItem); nothing else, and no GetOrder anywhere.
func TestStoreCallsSingleStepHappyPath(t *testing.T) {
	t.Parallel()
	f := newFixture(t)

	f.deliver(intake("o-cost1", "payment", f.replyURL))
	calls, _ := f.calls.take()
	require.Equal(t, map[string]int{"Submit": 1}, calls, "intake: one transaction, no read")
	req := f.request()
	require.Equal(t, "payment", req.Workflow, "the request carries what the reply must echo")
	require.Equal(t, f.replyURL, req.ReplyTo)

	f.clock.Advance(time.Second)
	f.deliver(done(req))
	calls, next := f.calls.take()
	require.Equal(t, map[string]int{"Complete": 1}, calls, "done: one fenced write, no read")
	require.Equal(t, []*sas.ClaimParams{nil}, next, "the last step claims no successor")

	require.Equal(t, []string{"received#1000", "step-done/charge#3001", "processed#4000"}, statusList(f.statuses()))
	require.Equal(t, []sas.ProcessState{sas.Processed}, f.states("o-cost1"))
}

// A three-step order: each done reply is one Complete, the non-last ones
// claiming the successor in the same write. The first reads nothing; each
// later one reads the order once before its write (GetOrder), for the
// results of the steps before it, which its successor's request or the
// processed status carries and whose bound per order it checks
// (docs/protocol.md, "Results").
func TestStoreCallsMultiStepHappyPath(t *testing.T) {
	t.Parallel()
	f := newFixture(t)

	f.deliver(intake("o-cost3", "order", f.replyURL))
	calls, _ := f.calls.take()
	require.Equal(t, map[string]int{"Submit": 1}, calls)

	req := f.request()
	for i := 0; i < 3; i++ {
		require.Equal(t, i, req.Step)
		f.clock.Advance(time.Second)
		f.deliver(done(req))
		calls, next := f.calls.take()
		if i == 0 {
			require.Equal(t, map[string]int{"Complete": 1}, calls, "step %d: one fenced write, no read", i)
		} else {
			require.Equal(t, map[string]int{"GetOrder": 1, "Complete": 1}, calls, "step %d: one read of the results before it, one fenced write", i)
		}
		require.Len(t, next, 1)
		if i < 2 {
			require.NotNil(t, next[0], "step %d: the successor is claimed in the same write", i)
			require.Equal(t, sas.StepKey{OrderID: "o-cost3", Step: i + 1}, next[0].Key)
			require.Equal(t, sas.Pending, next[0].From)
			require.Equal(t, owner, next[0].Owner)
			req = f.request()
			require.Equal(t, i+1, req.Step)
			require.Equal(t, 1, req.Attempt)
			require.Equal(t, "order", req.Workflow, "the successor's request carries the echo too")
			require.JSONEq(t, `{"amount":42,"currency":"EUR"}`, string(req.Payload), "the payload comes from the reply")
			require.Equal(t, f.replyURL, req.ReplyTo)
		} else {
			require.Nil(t, next[0])
			require.Empty(t, f.requests())
		}
	}
	require.Equal(t, []string{"received#1000", "step-done/reserve#3001", "step-done/charge#5001", "step-done/ship#7001", "processed#8000"},
		statusList(f.statuses()))
	v := f.view("o-cost3")
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processed, sas.Processed}, f.states("o-cost3"))
	for _, r := range v.Steps {
		require.Equal(t, 1, r.Attempt, "each step claimed once")
	}
}

// Off the happy path the scheduler reads where it must: failures that may
// need compensation, undos with an earlier step to undo, duplicates (after
// their write lost), and replies without the echo. A stale reply is told by
// the record its lost write returns.
func TestStoreCallsOffTheHappyPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		setup   func(f *fixture) string // returns the message to count
		want    map[string]int
		wantReq func(t *testing.T, reqs []sas.AgentRequest)
	}{
		{
			// A refused step is undone too (docs/protocol.md, "A refusal is
			// not proof of no effect").
			name: "failure of a first step with an undo: read, then claim its own undo",
			setup: func(f *fixture) string {
				f.deliver(intake("o-off", "payment", f.replyURL))
				return reply(f.request(), sas.OutcomeFailed, "declined")
			},
			want: map[string]int{"Fail": 1, "GetOrder": 1, "Claim": 1},
		},
		{
			name: "failure after a step with an undo: read, then claim the undo",
			setup: func(f *fixture) string {
				return reply(f.runForward("o-off", "order", 1), sas.OutcomeFailed, "declined")
			},
			want: map[string]int{"Fail": 1, "GetOrder": 1, "Claim": 1},
			wantReq: func(t *testing.T, reqs []sas.AgentRequest) {
				require.Len(t, reqs, 1)
				require.True(t, reqs[0].Compensation)
				require.Equal(t, "order", reqs[0].Workflow, "an undo's request carries the echo too")
			},
		},
		{
			name: "undo done with an earlier step to undo: read, then complete with the next undo",
			setup: func(f *fixture) string {
				f.deliver(reply(f.runForward("o-off", "order", 2), sas.OutcomeFailed, "declined"))
				undo := f.request()
				require.Equal(t, 1, undo.Step)
				return done(undo)
			},
			want: map[string]int{"GetOrder": 1, "Complete": 1},
		},
		{
			// The last undo reads again after its completion: a late
			// success may have marked a step owed meanwhile (hole 4 of the
			// simulator's issue; docs/protocol.md, "Compensation").
			name: "undo done of the first step: read (the records plan the compensation), complete, read again (the last undo)",
			setup: func(f *fixture) string {
				f.deliver(reply(f.runForward("o-off", "order", 1), sas.OutcomeFailed, "declined"))
				f.deliver(done(f.request())) // the refused charge's undo
				undo := f.request()
				require.Equal(t, 0, undo.Step)
				return done(undo)
			},
			want: map[string]int{"GetOrder": 2, "Complete": 1},
		},
		{
			name: "undo failed: no read",
			setup: func(f *fixture) string {
				f.deliver(reply(f.runForward("o-off", "order", 2), sas.OutcomeFailed, "declined"))
				return reply(f.request(), sas.OutcomeFailed, "refund refused")
			},
			want: map[string]int{"Fail": 1},
		},
		{
			name: "duplicate done: the write loses, the record it returns shows the twin's success; the successor is read to re-send its request",
			setup: func(f *fixture) string {
				f.deliver(intake("o-off", "order", f.replyURL))
				body := done(f.request())
				f.deliver(body)
				return body
			},
			want: map[string]int{"Complete": 1, "GetStep": 1},
		},
		{
			name: "stale done after a rescue: the write loses, and the record it returns says stale",
			setup: func(f *fixture) string {
				f.deliver(intake("o-off", "payment", f.replyURL))
				body := done(f.request())
				f.clock.Advance(leaseTime + time.Second)
				f.rescue("o-off", 0)
				return body
			},
			want: map[string]int{"Complete": 1, "NoteEffect": 1},
		},
		{
			name: "a reply without the echo: dropped, no call",
			setup: func(f *fixture) string {
				f.deliver(intake("o-off", "payment", f.replyURL))
				return legacyReply(f.request(), sas.OutcomeDone, "")
			},
			want: map[string]int{},
		},
		{
			name: "retry: read, claim; the request carries the echo",
			setup: func(f *fixture) string {
				f.deliver(intake("o-off", "payment", f.replyURL))
				f.request()
				f.clock.Advance(leaseTime + time.Second)
				f.rescue("o-off", 0)
				return retryMsg("o-off", 0, 1)
			},
			want: map[string]int{"GetOrder": 1, "Claim": 1},
			wantReq: func(t *testing.T, reqs []sas.AgentRequest) {
				require.Len(t, reqs, 1)
				require.Equal(t, "payment", reqs[0].Workflow)
				require.NotEmpty(t, reqs[0].ReplyTo)
				require.JSONEq(t, `{"amount":42,"currency":"EUR"}`, string(reqs[0].Payload))
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			body := tc.setup(f)
			f.requests()
			f.calls.take()

			f.deliver(body)
			calls, _ := f.calls.take()
			require.Equal(t, tc.want, calls)
			if tc.wantReq != nil {
				tc.wantReq(t, f.requests())
			}
		})
	}
}

// The echoed fields route a reply (message v1: every agent echoes them);
// the fence decides. A reply whose echo does not match its step loses its
// write or is refused before any, and changes nothing: the step stays as
// it is until its holder's real reply, or the supervisor, moves it.
func TestTheEchoRoutesTheFenceDecides(t *testing.T) {
	t.Parallel()

	// The leg and the replyTo are signed (docs/trust.md): a reply that
	// rewrites them is dropped before any write, and the holder's genuine
	// reply still goes through.
	t.Run("undo reply echoing a forward step: dropped, nothing changes", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		f.deliver(reply(f.runForward("o-hint", "order", 2), sas.OutcomeFailed, "declined"))
		undo := f.request()
		require.True(t, undo.Compensation)
		before := f.view("o-hint")
		forged := undo
		forged.Compensation = false // an agent that lost the flag
		f.calls.take()

		f.deliver(done(forged))
		calls, _ := f.calls.take()
		require.Empty(t, calls)
		require.Equal(t, before.Steps, f.view("o-hint").Steps)
		require.Empty(t, f.requests())
		f.deliver(done(undo))
		require.Equal(t, sas.Compensated, f.step("o-hint", 1).ProcessState)
	})

	t.Run("forward reply echoing an undo: dropped, nothing changes", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		f.deliver(intake("o-hint", "payment", f.replyURL))
		req := f.request()
		before := f.view("o-hint")
		forged := req
		forged.Compensation = true
		f.calls.take()

		f.deliver(done(forged))
		calls, _ := f.calls.take()
		require.Empty(t, calls)
		require.Equal(t, before.Steps, f.view("o-hint").Steps)
		f.deliver(done(req))
		require.Equal(t, []sas.ProcessState{sas.Processed}, f.states("o-hint"))
	})

	t.Run("a replyTo the deployment does not allow gets nothing", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		f.deliver(intake("o-hint", "payment", f.replyURL))
		req := f.request()
		f.statuses()
		forged := req
		forged.ReplyTo = f.deniedURL
		f.deliver(done(forged))
		require.Equal(t, []sas.ProcessState{sas.Processing}, f.states("o-hint"))
		require.Empty(t, f.statusesAt(f.deniedURL))
		f.deliver(done(req))
		require.Equal(t, []sas.ProcessState{sas.Processed}, f.states("o-hint"))
		require.Empty(t, f.statusesAt(f.deniedURL))
	})

	for name, mutate := range map[string]func(*sas.AgentRequest){
		"an unregistered workflow":       func(r *sas.AgentRequest) { r.Workflow = "refund" },
		"a step name not the workflow's": func(r *sas.AgentRequest) { r.StepName = "ship" },
		"another workflow's step":        func(r *sas.AgentRequest) { r.Workflow = "payment" },
		"no echo at all":                 func(r *sas.AgentRequest) { r.Workflow, r.StepName = "", "" },
	} {
		t.Run(name+": dropped before any write", func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.deliver(intake("o-hint", "order", f.replyURL))
			req := f.request()
			mutate(&req)
			f.calls.take()

			f.deliver(done(req))
			calls, _ := f.calls.take()
			require.Empty(t, calls)
			require.Equal(t, []sas.ProcessState{sas.Processing, sas.Pending, sas.Pending}, f.states("o-hint"))
			require.Empty(t, f.requests())
		})
	}

	// The successor is claimed as never claimed (Pending, attempt 0). Here
	// it is not (an intruder's claim of it was rescued): the transaction is
	// refused whole and nothing is written; the step's lease runs out and
	// the supervisor takes it from there.
	t.Run("a successor not as expected: refused, nothing written", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		f.deliver(intake("o-hint", "order", f.replyURL))
		req := f.request()
		now := f.clock.Now()
		_, err := f.mem.Claim(f.ctx, sas.ClaimParams{
			Key: sas.StepKey{OrderID: "o-hint", Step: 1}, Owner: "intruder", Now: now, CompleteBy: now.Add(time.Second),
		})
		require.NoError(t, err)
		f.clock.Advance(2 * time.Second)
		f.rescue("o-hint", 1)
		f.calls.take()

		f.deliver(done(req))
		calls, _ := f.calls.take()
		require.Equal(t, map[string]int{"Complete": 1}, calls)
		require.Empty(t, f.requests())
		require.Equal(t, []sas.ProcessState{sas.Processing, sas.Pending, sas.Pending}, f.states("o-hint"))
	})
}
