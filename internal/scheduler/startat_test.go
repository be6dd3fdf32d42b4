package scheduler_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

func intakeAt(id string, startAt time.Time) string {
	b, _ := json.Marshal(map[string]any{"v": 1, "orderId": id, "workflow": "reminder", "payload": map[string]any{},
		"startAt": startAt.Format(time.RFC3339Nano)})
	return string(b)
}

func TestAnOrderStartsAtItsStartTimeNeverBefore(t *testing.T) {
	t.Parallel()
	f, h, control := timerFixture(t, sas.Timer{For: time.Hour})
	f.calls.take()
	f.from(h, intakeARN, intakeAt("o-later", t0.Add(2*time.Hour)))
	calls, _ := f.calls.take()
	require.Equal(t, map[string]int{"Submit": 1}, calls, "stored at once, one write")
	require.Empty(t, f.requests(), "nothing runs before its start time")
	require.Empty(t, f.drain(control), "two hours is past SQS's delay: the sweep starts it")
	r := f.step("o-later", 0)
	require.Equal(t, sas.Pending, r.ProcessState)
	require.Zero(t, r.Attempt)
	require.Equal(t, t0.Add(2*time.Hour), r.DueAt, "its start time in the deadline index")

	f.clock.Advance(2*time.Hour - time.Second)
	f.from(h, controlARN, retryMsg("o-later", 0, 0))
	require.Empty(t, f.requests(), "a retry before the start time starts nothing")
	require.Equal(t, sas.Pending, f.step("o-later", 0).ProcessState)

	f.clock.Advance(time.Second)
	f.from(h, controlARN, retryMsg("o-later", 0, 0)) // the sweep's
	req := f.request()
	require.Equal(t, "order", req.StepName)
	require.Equal(t, 1, req.Attempt)
	require.Zero(t, f.step("o-later", 0).FailureCount)
}

func TestAnOrderStartingSoonStartsByItsOwnDelayedMessage(t *testing.T) {
	t.Parallel()
	f, h, control := timerFixture(t, sas.Timer{For: time.Hour})
	f.from(h, intakeARN, intakeAt("o-soon", t0.Add(10*time.Minute+300*time.Millisecond)))
	f.clock.Advance(10 * time.Minute)
	require.Empty(t, f.drain(control), "not before its start time")
	f.clock.Advance(time.Second)
	msgs := f.drain(control)
	require.Len(t, msgs, 1)
	f.from(h, controlARN, msgs[0])
	require.Equal(t, "order", f.request().StepName)

	// A start time already past: it starts at once, as any order.
	f.from(h, intakeARN, intakeAt("o-past", t0))
	require.Equal(t, "o-past", f.request().OrderID)

	// More than a year ahead: rejected alone, with its reason.
	f.from(h, intakeARN, intakeAt("o-far", t0.Add(sas.MaxWait+24*time.Hour)))
	f.requireNoOrder("o-far")
}
