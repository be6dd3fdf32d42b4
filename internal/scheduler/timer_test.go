package scheduler_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
)

// reminder: an order, a wait, a reminder.
func reminderWorkflow(t sas.Timer) sas.Workflow {
	return sas.Workflow{Name: "reminder", Steps: []sas.StepDef{
		{Name: "order", Agent: "payments", Action: "POST /orders", Timeout: stepTimeout},
		{Name: "wait", Timer: &t},
		{Name: "remind", Agent: "payments", Action: "POST /reminders", Timeout: stepTimeout},
	}}
}

// timerFixture is a fixture whose scheduler runs the reminder workflow
// with wait t, its control queue one the fixture can read.
func timerFixture(t *testing.T, wait sas.Timer) (*fixture, *scheduler.Handler, string) {
	return controlFixture(t, reminderWorkflow(wait))
}

// controlFixture is a fixture whose scheduler runs wf, its control queue
// one the fixture can read.
func controlFixture(t *testing.T, wf sas.Workflow) (*fixture, *scheduler.Handler, string) {
	f := newFixture(t)
	reg, err := sas.NewRegistry(wf)
	require.NoError(t, err)
	c, err := f.q.CreateQueue(f.ctx, sas.CreateQueueParams{Name: "sas-control"})
	require.NoError(t, err)
	h := scheduler.NewHandler(f.newServiceConfig(owner, reg, sas.AgentQueues{Default: f.agentURL},
		func(cfg *scheduler.Config) { cfg.ControlQueueURL = c.URL }))
	return f, h, c.URL
}

func reminderIntake(id string, payload string) string {
	m := map[string]any{"v": 1, "orderId": id, "workflow": "reminder", "payload": json.RawMessage(payload)}
	b, _ := json.Marshal(m)
	return string(b)
}

// toWait runs a reminder order through its first step: its wait claimed.
func (f *fixture) toWait(h *scheduler.Handler, id, payload string) {
	f.t.Helper()
	f.from(h, intakeARN, reminderIntake(id, payload))
	f.from(h, schedulerARN, done(f.request()))
	require.Empty(f.t, f.requests(), "a wait step sends no agent request")
}

func TestWaitStepEndsAtItsDueTimeAndNeverBefore(t *testing.T) {
	t.Parallel()
	f, h, control := timerFixture(t, sas.Timer{For: 72 * time.Hour})
	f.toWait(h, "o-w", `{}`)
	claimed := t0 // the fake clock has not moved: the wait was claimed with the first step's completion
	r := f.step("o-w", 1)
	require.Equal(t, sas.Processing, r.ProcessState)
	require.Equal(t, claimed.Add(72*time.Hour), r.DueAt, "the due time sits in the deadline index")
	require.Empty(t, f.drain(control), "72 hours is past SQS's delay: the sweep ends it")

	// Three days of waiting cost nothing.
	f.calls.take()
	f.clock.Advance(72*time.Hour - time.Second)

	// A retry before the due time (an operator's, or a forged one) ends nothing.
	f.from(h, controlARN, retryMsg("o-w", 1, 1))
	require.Equal(t, sas.Processing, f.step("o-w", 1).ProcessState, "a timer never fires early")
	require.Empty(t, f.requests())

	f.clock.Advance(time.Second)
	f.calls.take()
	f.from(h, controlARN, retryMsg("o-w", 1, 1)) // the sweep's
	calls, _ := f.calls.take()
	require.Equal(t, map[string]int{"GetOrder": 1, "Complete": 1}, calls, "the end of a wait: the order read, one fenced write with the successor's claim")
	req := f.request()
	require.Equal(t, "remind", req.StepName)
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processed, sas.Processing}, f.states("o-w"))

	// A duplicate (the sweep's and the scheduler's own racing) changes nothing.
	f.from(h, controlARN, retryMsg("o-w", 1, 1))
	f.requests()
	v := f.view("o-w")
	require.Equal(t, 1, transitions(v.Steps[1], sas.Processed))
	require.Equal(t, 1, v.Steps[2].Attempt)

	// An agent's reply for a wait step is dropped: only its due time ends it.
	require.Equal(t, sas.Processing, v.Steps[2].ProcessState)
}

func TestShortWaitEndsByItsOwnDelayedMessage(t *testing.T) {
	t.Parallel()
	f, h, control := timerFixture(t, sas.Timer{For: 90 * time.Second})
	f.toWait(h, "o-s", `{}`)
	require.Empty(t, f.drain(control), "not before its delay")
	f.clock.Advance(90 * time.Second)
	msgs := f.drain(control)
	require.Len(t, msgs, 1, "within SQS's delay the scheduler sends itself the wait's end")
	f.from(h, controlARN, msgs[0])
	require.Equal(t, "remind", f.request().StepName)
	require.Equal(t, sas.Processed, f.step("o-s", 1).ProcessState)
}

func TestWaitUntilATimeFromThePayload(t *testing.T) {
	t.Parallel()
	f, h, control := timerFixture(t, sas.Timer{Until: "payload.remindAt"})
	at := t0.Add(48 * time.Hour)
	f.toWait(h, "o-u", `{"remindAt":"`+at.Format(time.RFC3339)+`"}`)
	r := f.step("o-u", 1)
	require.Equal(t, at, r.DueAt, "armed: the time from the payload is the lease")
	require.Empty(t, f.drain(control))

	f.clock.Advance(47 * time.Hour)
	f.from(h, controlARN, retryMsg("o-u", 1, 1))
	require.Equal(t, sas.Processing, f.step("o-u", 1).ProcessState, "never early")
	f.clock.Advance(time.Hour)
	f.from(h, controlARN, retryMsg("o-u", 1, 1))
	require.Equal(t, "remind", f.request().StepName)

	// A time in the past: the wait ends at once (its own message, a second later).
	f.toWait(h, "o-past", `{"remindAt":"2000-01-01T00:00:00Z"}`)
	f.clock.Advance(time.Second)
	msgs := f.drain(control)
	require.Len(t, msgs, 1)
	f.from(h, controlARN, msgs[0])
	require.Equal(t, "remind", f.request().StepName)

	// A value that is no time fails the step, with its reason, and no reminder goes out.
	f.toWait(h, "o-bad", `{"remindAt":"next tuesday"}`)
	bad := f.step("o-bad", 1)
	require.Equal(t, sas.Error, bad.ProcessState)
	require.Contains(t, bad.LastError, "not a time in RFC 3339")
	require.Empty(t, f.requests())
}

// A wait that ends its order, whose end's statuses could not be sent: the
// retry that ended it stays for redelivery, and should it reach its
// dead-letter queue (every handler of its last receives cut: the
// simulator's seed 1339), the operator's redrive of it posts what its order
// owes its submitter, the processed status with it, and writes nothing
// (docs/protocol.md, "Redrives").
func TestARedrivenWaitEndPostsTheOrdersFinalStatus(t *testing.T) {
	t.Parallel()
	f, h, control := controlFixture(t, sas.Workflow{Name: "reminder", Steps: []sas.StepDef{
		{Name: "order", Agent: "payments", Action: "POST /orders", Timeout: stepTimeout},
		{Name: "wait", Timer: &sas.Timer{For: 90 * time.Second}},
	}})
	f.from(h, intakeARN, intake("o-dl", "reminder", f.replyURL))
	f.from(h, schedulerARN, done(f.request()))
	f.statuses()
	f.clock.Advance(90 * time.Second)
	msgs := f.drain(control)
	require.Len(t, msgs, 1)
	end := msgs[0]

	f.failNextSends(f.replyURL, 100)
	ev := f.event(end)
	ev.Records[0].EventSourceARN = controlARN
	require.Len(t, f.handleWith(h, ev), 1, "its statuses not sent: the retry stays for redelivery")
	f.failNextSends(f.replyURL, 0)
	require.Equal(t, sas.Processed, f.view("o-dl").State(), "the wait ended, and its order with it")
	require.Empty(t, f.statuses())

	// Dead-lettered, then redriven by the operator through the control queue.
	f.calls.take()
	ev = f.duplicate(redrive(sas.RedriveControl, end))
	ev.Records[0].EventSourceARN = controlARN
	require.Empty(t, f.handleWith(h, ev))
	ss := f.statuses()
	require.NotEmpty(t, ss)
	require.Equal(t, sas.StatusProcessed, ss[len(ss)-1].Status, "the redrive posts the order's final status")
	require.Equal(t, 1, transitions(f.view("o-dl").Steps[1], sas.Processed), "and ends the wait no second time")
}
