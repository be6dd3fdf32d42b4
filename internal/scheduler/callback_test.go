package scheduler_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
)

// approval: a charge, a person's approval (a callback step), a shipment.
func approvalWorkflow(heartbeat time.Duration) sas.Workflow {
	return sas.Workflow{Name: "approval", Steps: []sas.StepDef{
		{Name: "charge", Agent: "payments", Action: "POST /payments", Undo: "POST /refunds", Timeout: stepTimeout},
		{Name: "approve", Callback: &sas.Callback{Timeout: 72 * time.Hour, Heartbeat: heartbeat}},
		{Name: "ship", Agent: "payments", Action: "POST /shipments", Timeout: stepTimeout},
	}}
}

// callbackFixture is a fixture whose scheduler runs the approval workflow.
func callbackFixture(t *testing.T, heartbeat time.Duration) (*fixture, *scheduler.Handler) {
	f := newFixture(t)
	reg, err := sas.NewRegistry(approvalWorkflow(heartbeat))
	require.NoError(t, err)
	h := scheduler.NewHandler(f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL}))
	return f, h
}

// from delivers bodies as one event from the queue arn, and requires that
// none failed.
func (f *fixture) from(h *scheduler.Handler, arn string, bodies ...string) {
	f.t.Helper()
	ev := f.event(bodies...)
	for i := range ev.Records {
		ev.Records[i].EventSourceARN = arn
		ev.Records[i].Attributes = map[string]string{"SenderId": "AROAEXAMPLE:approver"}
	}
	require.Empty(f.t, f.handleWith(h, ev), "no message of the batch may fail")
}

func completion(token string, outcome sas.Outcome, result, reason string) string {
	m := sas.Completion{V: sas.MessageVersion, Kind: sas.KindComplete, Token: token, Outcome: outcome, Reason: reason, Actor: "alice"}
	if result != "" {
		m.Result = json.RawMessage(result)
	}
	return sas.Encode(m)
}

// waitFor runs an approval order up to its waiting step and returns the
// token its waiting status handed out.
func (f *fixture) waitFor(h *scheduler.Handler, id string) string {
	f.t.Helper()
	f.from(h, intakeARN, intake(id, "approval", f.replyURL))
	f.from(h, schedulerARN, done(f.request()))
	require.Empty(f.t, f.requests(), "a callback step sends no agent request")
	var tok string
	for _, st := range f.statuses() {
		if st.Status == sas.StatusWaiting {
			require.Equal(f.t, "approve", st.Step)
			require.Equal(f.t, scheduler.SeqWaiting(1, 1), st.Sequence)
			tok = st.Token
		}
	}
	require.NotEmpty(f.t, tok, "the waiting status carries the token")
	return tok
}

func TestCallbackStepWaitsAndCompletesOnce(t *testing.T) {
	t.Parallel()
	f, h := callbackFixture(t, 0)
	tok := f.waitFor(h, "o-cb")

	r := f.step("o-cb", 1)
	require.Equal(t, sas.Processing, r.ProcessState)
	require.Equal(t, t0.Add(72*time.Hour), r.DueAt, "the wait's deadline sits in the deadline index: its timeout")
	alerts := f.alerts.all()
	require.Len(t, alerts, 1, "people are told the step waits")
	require.Equal(t, "o-cb/1/waiting/1", alerts[0].ID)
	require.Contains(t, alerts[0].Reason, tok)

	// A week of waiting costs the store nothing: no poll.
	f.calls.take()
	f.clock.Advance(71 * time.Hour)

	// The outside world approves, through the intake queue.
	f.from(h, intakeARN, completion(tok, sas.OutcomeDone, `{"approvedBy":"alice"}`, ""))
	calls, _ := f.calls.take()
	require.Equal(t, map[string]int{"GetOrder": 1, "Complete": 1}, calls, "a completion: the order read (its token's step), one fenced write with the successor's claim")
	req := f.request()
	require.Equal(t, "ship", req.StepName)
	require.JSONEq(t, `{"approvedBy":"alice"}`, string(req.Results["approve"]), "the result flows on like any step's")
	require.Equal(t, sas.Processed, f.step("o-cb", 1).ProcessState)

	// A repeat, or a late one, changes nothing.
	f.from(h, intakeARN, completion(tok, sas.OutcomeDone, `{"approvedBy":"mallory"}`, ""))
	f.from(h, controlARN, completion(tok, sas.OutcomeFailed, "", "too late"))
	f.requests() // the repeat re-sends the live successor's request, nothing else
	v := f.view("o-cb")
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processed, sas.Processing}, f.states("o-cb"))
	require.JSONEq(t, `{"approvedBy":"alice"}`, string(v.Steps[1].Result), "the first completion's result stays")
	require.Equal(t, 1, transitions(v.Steps[1], sas.Processed))
	require.Equal(t, 1, v.Steps[2].Attempt)
}

func TestCallbackTokenCannotBeForged(t *testing.T) {
	t.Parallel()
	f, h := callbackFixture(t, 0)
	tok := f.waitFor(h, "o-a")
	f.waitFor(h, "o-b")

	body, sig, _ := strings.Cut(tok, "~")
	raw, err := base64.RawURLEncoding.DecodeString(body)
	require.NoError(t, err)
	other := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), `"o-a"`, `"o-b"`, 1)))
	forged, err := sas.NewSigner([]byte("another deployment's key, 32 bytes!!"))
	require.NoError(t, err)
	for name, bad := range map[string]string{
		"another order under o-a's signature": other + "~" + sig,
		"a signature cut":                     body + "~" + sig[:len(sig)-2],
		"no signature":                        body,
		"another key":                         forged.MintToken(sas.Token{OrderID: "o-a", Step: 1, Attempt: 1, Holder: owner, IssuedAt: t0}),
		"guessed":                             "eyJvIjoiby1hIn0~v2.AAAA.BBBB",
	} {
		f.from(h, intakeARN, completion(bad, sas.OutcomeDone, "", ""))
		require.Equal(t, sas.Processing, f.step("o-a", 1).ProcessState, name)
		require.Equal(t, sas.Processing, f.step("o-b", 1).ProcessState, name)
	}
	require.Empty(t, f.requests())

	// From the scheduler queue (every agent may send there) even a good
	// token does nothing: only the intake and control queues take it.
	f.from(h, schedulerARN, completion(tok, sas.OutcomeDone, "", ""))
	require.Equal(t, sas.Processing, f.step("o-a", 1).ProcessState)

	// An agent's reply, even one that names the step's fence, is no
	// completion: only the token completes a callback step.
	r := f.step("o-b", 1)
	f.from(h, schedulerARN, sas.Encode(sas.AgentReply{V: 1, Kind: sas.KindAgentReply, OrderID: "o-b", Step: 1, Attempt: r.Attempt,
		LockedBy: r.LockedBy, Outcome: sas.OutcomeDone, Workflow: "approval", StepName: "approve"}))
	require.Equal(t, sas.Processing, f.step("o-b", 1).ProcessState, "an unsigned reply does not complete a callback step")

	// A malformed completion is rejected alone; its batch goes on.
	ev := f.event(completion("", sas.OutcomeDone, "", ""), completion(tok, sas.OutcomeDone, "", ""))
	for i := range ev.Records {
		ev.Records[i].EventSourceARN = controlARN
	}
	require.Empty(t, f.handleWith(h, ev))
	require.Equal(t, sas.Processed, f.step("o-a", 1).ProcessState)
}

func TestCallbackFailedIsCompensated(t *testing.T) {
	t.Parallel()
	for _, rejected := range []bool{false, true} {
		f, h := callbackFixture(t, 0)
		tok := f.waitFor(h, "o-no")
		f.alerts = &recorder{}
		m := sas.Completion{V: 1, Kind: sas.KindComplete, Token: tok, Outcome: sas.OutcomeFailed, Reason: "not approved", Rejected: rejected}
		f.from(h, controlARN, sas.Encode(m))
		r := f.step("o-no", 1)
		require.Equal(t, sas.Error, r.ProcessState)
		require.Contains(t, r.LastError, "not approved")
		require.Equal(t, rejected, r.Rejected)
		undo := f.request()
		require.True(t, undo.Compensation, "the charge before it is undone")
		require.Equal(t, "charge", undo.StepName)
		f.from(h, schedulerARN, done(undo))
		require.Equal(t, sas.Compensated, f.step("o-no", 0).ProcessState)
		if rejected {
			require.Equal(t, sas.Rejected, f.view("o-no").State(), "a rejection ends the order Rejected")
		}
	}
}

func TestCallbackHeartbeatMovesTheDeadlineWithinTheTimeout(t *testing.T) {
	t.Parallel()
	f, h := callbackFixture(t, time.Hour)
	tok := f.waitFor(h, "o-hb")
	require.Equal(t, t0.Add(time.Hour), f.step("o-hb", 1).DueAt, "due at the first heartbeat's deadline")

	f.clock.Advance(50 * time.Minute)
	f.from(h, intakeARN, completion(tok, sas.OutcomeHeartbeat, "", ""))
	require.Equal(t, t0.Add(110*time.Minute), f.step("o-hb", 1).DueAt)

	// Never past the timeout.
	f.clock.Set(t0.Add(71*time.Hour + 30*time.Minute))
	r := f.step("o-hb", 1)
	_, err := f.mem.Heartbeat(f.ctx, sas.HeartbeatParams{Key: r.Key(), Owner: r.LockedBy, Attempt: 1, Now: f.clock.Now(), Until: f.clock.Now().Add(time.Minute)})
	require.NoError(t, err) // as if heartbeats kept it alive until now
	f.from(h, intakeARN, completion(tok, sas.OutcomeHeartbeat, "", ""))
	require.Equal(t, t0.Add(72*time.Hour), f.step("o-hb", 1).DueAt, "a heartbeat never moves the deadline past the timeout")

	// Past its deadline the step no longer waits: a completion is late.
	f.clock.Set(t0.Add(72 * time.Hour))
	f.from(h, intakeARN, completion(tok, sas.OutcomeDone, "", ""))
	require.Equal(t, sas.Processing, f.step("o-hb", 1).ProcessState, "left for the supervisor to give up")
	require.Empty(t, f.requests())
}

var _ = events.SQSEvent{}

// An operator's completion names the waiting attempt instead of carrying its
// token (the console's approvals, `sasctl complete -order`): believed from
// the control queue alone, and held to the same fence as a token.
func TestAnOperatorCompletesAWaitingStepByName(t *testing.T) {
	t.Parallel()
	f, h := callbackFixture(t, 0)
	f.waitFor(h, "o-op")
	f.waitFor(h, "o-other")
	rec := f.step("o-op", 1)
	named := func(w sas.WaitingStep, outcome sas.Outcome, result string) string {
		m := sas.Completion{V: 1, Kind: sas.KindComplete, Step: &w, Outcome: outcome, Actor: "console:alice"}
		if result != "" {
			m.Result = json.RawMessage(result)
		}
		return sas.Encode(m)
	}
	w := sas.WaitingStepOf(rec)

	// From the intake queue (applications, completers) a named completion
	// is no right to anything: a token is.
	f.from(h, intakeARN, named(w, sas.OutcomeDone, `{"ok":true}`))
	require.Equal(t, sas.Processing, f.step("o-op", 1).ProcessState, "only the control queue believes a completion without a token")

	// Another attempt, holder or generation than the waiting one's (a page
	// read before the step was re-run): nothing.
	for name, bad := range map[string]sas.WaitingStep{
		"another attempt":    {OrderID: w.OrderID, Step: 1, Attempt: w.Attempt + 1, Holder: w.Holder},
		"another holder":     {OrderID: w.OrderID, Step: 1, Attempt: w.Attempt, Holder: "someone-else"},
		"another generation": {OrderID: w.OrderID, Step: 1, Attempt: w.Attempt, Generation: w.Generation + 1, Holder: w.Holder},
	} {
		f.from(h, controlARN, named(bad, sas.OutcomeDone, ""))
		require.Equal(t, sas.Processing, f.step("o-op", 1).ProcessState, name)
		require.Equal(t, sas.Processing, f.step("o-other", 1).ProcessState, name)
	}
	require.Empty(t, f.requests())

	// The operator's approval completes it, once, with its result; the
	// history says who.
	f.from(h, controlARN, named(w, sas.OutcomeDone, `{"approvedBy":"alice"}`))
	req := f.request()
	require.Equal(t, "ship", req.StepName)
	require.JSONEq(t, `{"approvedBy":"alice"}`, string(req.Results["approve"]))
	done := f.view("o-op").Steps[1].History
	require.Equal(t, "completed by sender:AROAEXAMPLE:approver (says console:alice)", done[len(done)-1].Reason, "the history names the completer")
	f.from(h, controlARN, named(w, sas.OutcomeFailed, ""))
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processed, sas.Processing}, f.states("o-op"), "a late rejection changes nothing")
	f.requests()

	// A named rejection of the other order: Error, Rejected, its charge undone.
	ow := sas.WaitingStepOf(f.step("o-other", 1))
	m := sas.Completion{V: 1, Kind: sas.KindComplete, Step: &ow, Outcome: sas.OutcomeFailed, Reason: "over budget", Rejected: true, Actor: "console:bob"}
	f.from(h, controlARN, sas.Encode(m))
	r := f.step("o-other", 1)
	require.Equal(t, sas.Error, r.ProcessState)
	require.True(t, r.Rejected)
	require.Contains(t, r.LastError, "over budget")
	require.Contains(t, r.LastError, "console:bob", "the reason records who rejected it")
	require.True(t, f.request().Compensation)
}
