package scheduler_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

func TestFullSuccessReturnsEmptyNonNilList(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, ev := range []events.SQSEvent{{}, f.event(intake("o-ok", "payment", ""))} {
		resp, err := f.h.Handle(f.ctx, ev)
		require.NoError(t, err)
		require.NotNil(t, resp.BatchItemFailures)
		require.Empty(t, resp.BatchItemFailures)
		b, err := json.Marshal(resp)
		require.NoError(t, err)
		require.JSONEq(t, `{"batchItemFailures":[]}`, string(b), "never null: some pollers redeliver a null forever")
	}
	require.Equal(t, []sas.ProcessState{sas.Processing}, f.states("o-ok"))
}

func TestPartialBatchFailure(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// The agent queue refuses o-2's request (throttled), and the store is
	// unreachable for o-3's reply: both are transient, reported, redelivered.
	f.failEntries(func(url, body string) bool {
		return url == f.agentURL && strings.Contains(body, `"orderId":"o-2"`)
	})
	f.deliver(intake("o-3", "payment", ""))
	reply3 := done(f.request())
	f.store.mu.Lock()
	f.store.fail["o-3"] = errors.New("ProvisionedThroughputExceededException")
	f.store.mu.Unlock()

	ev := f.event(
		intake("o-1", "payment", ""),
		intake("o-2", "payment", ""),
		`not json at all`,
		reply3,
		intake("o-4", "order", ""),
	)
	require.Equal(t, []string{ev.Records[1].MessageId, ev.Records[3].MessageId}, f.handle(ev), "exactly the transient failures")
	require.Len(t, f.requests(), 2, "o-1 and o-4 dispatched")
	require.Equal(t, []sas.ProcessState{sas.Processing}, f.states("o-2"), "written before the send failed")
	require.Equal(t, []sas.ProcessState{sas.Processing}, f.states("o-3"))

	// SQS redelivers only the failed ones; this time they go through.
	f.failEntries(nil)
	f.store.mu.Lock()
	delete(f.store.fail, "o-3")
	f.store.mu.Unlock()
	redelivery := events.SQSEvent{Records: []events.SQSMessage{ev.Records[1], ev.Records[3]}}
	require.Empty(t, f.handle(redelivery))
	req := f.request()
	require.Equal(t, "o-2", req.OrderID)
	require.Equal(t, []sas.ProcessState{sas.Processed}, f.states("o-3"))
	require.Equal(t, []sas.ProcessState{sas.Processing}, f.states("o-1"))
	require.Equal(t, []sas.ProcessState{sas.Processing, sas.Pending, sas.Pending}, f.states("o-4"))
}

func TestPanicFailsOnlyItsMessage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-p", "payment", ""))
	body := done(f.request())
	f.store.mu.Lock()
	f.store.panics["o-p"] = true
	f.store.mu.Unlock()

	ev := f.event(intake("o-a", "payment", ""), body, intake("o-b", "payment", ""))
	require.Equal(t, []string{ev.Records[1].MessageId}, f.handle(ev))
	require.Len(t, f.requests(), 2)
	require.Equal(t, []sas.ProcessState{sas.Processing}, f.states("o-p"))
}

func TestCancelledContextLeavesTheRestForRedelivery(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithCancel(f.ctx)
	cancel()
	ev := f.event(intake("o-x", "payment", ""), intake("o-y", "payment", ""))
	resp, err := f.h.Handle(ctx, ev)
	require.NoError(t, err)
	require.Len(t, resp.BatchItemFailures, 2)
	f.requireNoOrder("o-x")
}

// Messages that can never succeed are acknowledged without effect, and
// never disturb the order they name.
func TestUnusableMessagesAreAcknowledged(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body func(req sas.AgentRequest) string
	}{
		{"reply for an unknown order", func(r sas.AgentRequest) string { r.OrderID = "o-nobody"; return done(r) }},
		{"reply for a step the order lacks", func(r sas.AgentRequest) string { r.Step = 7; return done(r) }},
		{"reply with an unknown outcome", func(r sas.AgentRequest) string { return reply(r, "maybe", "") }},
		{"reply without a holder", func(r sas.AgentRequest) string { r.LockedBy = ""; return done(r) }},
		{"reply with attempt 0", func(r sas.AgentRequest) string { r.Attempt = 0; return done(r) }},
		{"reply from another holder", func(r sas.AgentRequest) string { r.LockedBy = "scheduler-impostor"; return done(r) }},
		{"reply of a future attempt", func(r sas.AgentRequest) string { r.Attempt = 9; return done(r) }},
		{"reply of another version", func(r sas.AgentRequest) string {
			return strings.Replace(done(r), `"v":1`, `"v":2`, 1)
		}},
		{"reply with a malformed field", func(sas.AgentRequest) string {
			return `{"v":1,"kind":"agent.reply","orderId":"o-u","step":"first","attempt":1,"lockedBy":"x","outcome":"done"}`
		}},
		{"retry with a negative step", func(sas.AgentRequest) string { return retryMsg("o-u", -1, 1) }},
		{"retry of a step that waits for its predecessor", func(sas.AgentRequest) string { return retryMsg("o-u", 1, 0) }},
		{"retry for an unknown order", func(sas.AgentRequest) string { return retryMsg("o-nobody", 0, 1) }},
		{"compensate without an order id", func(sas.AgentRequest) string { return `{"v":1,"kind":"compensate"}` }},
		{"the scheduler's own request", func(r sas.AgentRequest) string { return sas.Encode(r) }},
		{"a status message", func(sas.AgentRequest) string {
			return sas.Encode(sas.Status{V: 1, Kind: sas.KindStatus, OrderID: "o-u", Status: "processed"})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.deliver(intake("o-u", "order", f.replyURL))
			req := f.request()
			f.statuses()
			before := f.view("o-u")

			f.deliver(tc.body(req))
			require.Empty(t, f.requests())
			require.Empty(t, f.statuses())
			require.Empty(t, f.alerts.all())
			require.Equal(t, before.Steps, f.view("o-u").Steps)
		})
	}
}

func loadEvent(t *testing.T, name string) events.SQSEvent {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	var ev events.SQSEvent
	require.NoError(t, json.Unmarshal(b, &ev))
	require.NotEmpty(t, ev.Records)
	return ev
}

// The golden events are SQS events as Lambda delivers them: an intake batch
// with one good order and two bad ones, the agent's reply (twice, as SQS may
// deliver it; an agent built before signatures, so the reply is handled
// from the store), and a control-queue batch mixing an operator's
// compensate with messages that must be dropped.
func TestGoldenEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	require.Equal(t, "http://memqueue.local/000000000000/caller", f.replyURL, "the golden events name this replyTo")

	require.Empty(t, f.handle(loadEvent(t, "intake-batch.json")))
	req := f.request()
	require.Equal(t, "golden-1", req.OrderID)
	require.JSONEq(t, `{"amount":1999,"currency":"EUR","card":"tok_visa"}`, string(req.Payload))
	st := f.statuses()
	require.Equal(t, []string{"received#1000", "rejected#0"}, statusList(st))
	require.Equal(t, "golden-1", st[0].OrderID)
	require.Equal(t, "golden-3", st[1].OrderID)
	require.Contains(t, st[1].Reason, `"subscription" is not a registered workflow`)
	f.requireNoOrder("golden-2")
	f.requireNoOrder("golden-3")
	require.Equal(t, 5, f.view("golden-1").Order.Priority)

	require.Empty(t, f.handle(loadEvent(t, "agent-reply.json")))
	require.Empty(t, f.requests())
	require.Equal(t, []string{"step-done/charge#3001", "processed#4000", "step-done/charge#3001", "processed#4000"}, statusList(f.statuses()))
	require.Equal(t, []sas.ProcessState{sas.Processed}, f.states("golden-1"))

	require.Empty(t, f.handle(loadEvent(t, "control-queue.json")))
	undo := f.request()
	require.True(t, undo.Compensation)
	require.Equal(t, "golden-1:0:undo", undo.IdempotencyKey)
	f.deliver(done(undo))
	require.Equal(t, []string{"compensated#7000"}, statusList(f.statuses()))
	require.Equal(t, []sas.ProcessState{sas.Compensated}, f.states("golden-1"))
}

// The intake queue carries orders only: a message there claiming another
// kind is rejected like any bad order, whatever it asks for.
func TestIntakeQueueCarriesOrdersOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.runForward("o-iq", "payment", 1)
	f.statuses()
	before := f.view("o-iq")

	compensate := `{"v":1,"kind":"compensate","orderId":"o-iq","replyTo":"` + f.replyURL + `"}`
	ev := f.event(compensate, retryMsg("o-iq", 0, 1), intake("o-iq2", "payment", ""))
	for i := range ev.Records {
		ev.Records[i].EventSourceARN = intakeARN
	}
	require.Empty(t, f.handle(ev))
	require.Equal(t, "o-iq2", f.request().OrderID, "only the order is acted on")
	st := f.statuses()
	require.Len(t, st, 1)
	require.Equal(t, sas.StatusRejected, st[0].Status)
	require.Contains(t, st[0].Reason, `"compensate" is not an intake message`)
	require.Equal(t, before.Steps, f.view("o-iq").Steps)
	require.Equal(t, []sas.ProcessState{sas.Processed}, f.states("o-iq"))

	// The same request from the control queue is obeyed.
	f.deliver(compensate)
	undo := f.request()
	require.True(t, undo.Compensation)
	require.Equal(t, []sas.ProcessState{sas.Compensating}, f.states("o-iq"))
}
