package localrun

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
)

// refused is a settled order whose only step was refused at attempt 1: it
// owes one alert.
func refused(id string) sas.OrderView {
	h := []sas.HistoryEntry{
		{From: "", To: sas.Processing, Attempt: 1, Actor: "scheduler-0"},
		{From: sas.Processing, To: sas.Error, Attempt: 1, Actor: "scheduler-0"},
	}
	r := sas.StepRecord{OrderID: id, Step: 0, StepName: "charge", ProcessState: sas.Error, Attempt: 1, History: h}
	return sas.OrderView{Order: sas.Order{OrderID: id, Workflow: registry.Payment}, Steps: []sas.StepRecord{r}, History: h}
}

// Issue 31: a scheduler that wrote a step's failure and died before its
// alert went out leaves the alert to its message's redelivery, after the
// order is settled. The run waits for it before it judges, rather than
// count it a mismatch; one that never comes is still missing after the
// grace.
func TestTheRunWaitsForAnAlertOwedAfterItsOrderSettled(t *testing.T) {
	t.Parallel()
	views := map[string]sas.OrderView{"o-1": refused("o-1")}
	var polls atomic.Int32
	late := func() []sas.Alert { // the redelivery's alert comes on the third look
		if polls.Add(1) < 3 {
			return nil
		}
		return []sas.Alert{{OrderID: "o-1", Step: 0, State: sas.Error, Attempts: 1}}
	}
	missing, waited := awaitOwedAlerts(context.Background(), views, late, time.Hour, time.Millisecond)
	require.Empty(t, missing)
	require.Positive(t, waited)
	require.EqualValues(t, 3, polls.Load(), "it stopped as soon as the alert came")

	never := func() []sas.Alert { return nil }
	missing, _ = awaitOwedAlerts(context.Background(), views, never, 10*time.Millisecond, time.Millisecond)
	require.Equal(t, []string{"o-1 step 0 entered Error at attempt 1: no alert"}, missing)

	missing, waited = awaitOwedAlerts(context.Background(), map[string]sas.OrderView{}, never, time.Hour, time.Millisecond)
	require.Empty(t, missing)
	require.Zero(t, waited, "nothing owed: no wait")
}
