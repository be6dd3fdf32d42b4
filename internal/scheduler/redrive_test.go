package scheduler_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

func redrive(queue, body string) string {
	return sas.Encode(sas.Redrive{V: sas.MessageVersion, Kind: sas.KindRedrive, Queue: queue, Body: body, MessageID: "dead-1", Actor: "operator:test"})
}

// TestARedriveIsARedelivery: an intake whose delivery claimed the first
// step and stopped before sending its request, until the message reached
// its dead-letter queue. Sent back to the intake queue as it is, it is a
// new message: a duplicate, which re-sends nothing, and the step would wait
// for its request's delivery horizon. Redriven as a sas.Redrive through the
// control queue, it is a redelivery: the request is sent again, once, the
// same attempt, and "received" posted again (docs/protocol.md, "Redrives").
func TestARedriveIsARedelivery(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	body := intake("o-rd", "order", f.replyURL)
	f.deliver(body)
	first := f.request()
	f.statuses()
	f.clock.Advance(leaseTime + time.Second)

	require.Empty(t, f.handle(f.duplicate(body)))
	require.Empty(t, f.requests(), "a dead letter sent back as it is re-sends nothing")

	require.Empty(t, f.handle(f.duplicate(redrive(sas.RedriveIntake, body))))
	require.Equal(t, first, f.request(), "the same request, same attempt")
	require.Equal(t, []string{"received#1000"}, statusList(f.statuses()))
	v := f.view("o-rd")
	require.Equal(t, 1, v.Steps[0].Attempt, "no second claim")
	require.Equal(t, []sas.ProcessState{sas.Processing, sas.Pending, sas.Pending}, f.states("o-rd"))

	// Once the agent reported its pick-up, a redrive sends nothing: the
	// request is not lost, it runs.
	f.started("o-rd", 0)
	require.Empty(t, f.handle(f.duplicate(redrive(sas.RedriveIntake, body))))
	require.Empty(t, f.requests())
}

// TestARedriveIsBelievedOnlyFromTheControlQueue: a redrive is believed for
// where it came from, and what it carries is held to its own queue's rules.
func TestARedriveIsBelievedOnlyFromTheControlQueue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	body := intake("o-rdt", "payment", f.replyURL)
	f.deliver(body)
	req := f.request()
	f.statuses()
	f.clock.Advance(leaseTime + time.Second)

	// From the scheduler queue (any agent's role may send there): dropped.
	ev := f.duplicate(redrive(sas.RedriveIntake, body))
	ev.Records[0].EventSourceARN = schedulerARN
	require.Empty(t, f.handle(ev))
	// From the intake queue: an intake with fields no intake has, rejected.
	ev = f.duplicate(redrive(sas.RedriveIntake, body))
	ev.Records[0].EventSourceARN = intakeARN
	require.Empty(t, f.handle(ev))
	// A redrive inside a redrive, and one naming no queue the scheduler
	// reads: dropped.
	require.Empty(t, f.handle(f.duplicate(redrive(sas.RedriveControl, redrive(sas.RedriveIntake, body)))))
	require.Empty(t, f.handle(f.duplicate(redrive("agent", body))))
	require.Empty(t, f.requests(), "none of them re-sent the request")

	// A reply carried by a redrive is believed only under the scheduler's
	// signature, as any reply: a forged success completes nothing.
	forged := sas.Encode(sas.AgentReply{V: sas.MessageVersion, Kind: sas.KindAgentReply, OrderID: "o-rdt", Step: 0,
		Attempt: req.Attempt, LockedBy: req.LockedBy, Outcome: sas.OutcomeDone, Result: json.RawMessage(`{"forged":true}`)})
	require.Empty(t, f.handle(f.duplicate(redrive(sas.RedriveScheduler, forged))))
	require.Equal(t, []sas.ProcessState{sas.Processing}, f.states("o-rdt"), "a forged reply completed the step")
	for _, s := range f.statuses() {
		require.NotEqual(t, sas.StatusProcessed, s.Status)
	}
}
