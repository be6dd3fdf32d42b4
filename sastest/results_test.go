package sastest_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/sastest"
	"github.com/sas-go/sas/workflow"
)

// A booking id flows from the step that made it to the step after it and
// into its own undo; the Result shows every step's result.
func TestResultsFlowThroughTheKit(t *testing.T) {
	t.Parallel()
	type booking struct {
		ID string `json:"bookingId"`
	}
	var undoSaw, hotelSaw string
	airline := agent.New("airline").Step("flight", func(_ context.Context, req agent.Request) (any, error) {
		return booking{ID: "F-" + req.OrderID}, nil
	}, func(_ context.Context, req agent.Request) (any, error) {
		var b booking
		if err := req.DecodeResult("flight", &b); err != nil {
			return nil, err
		}
		undoSaw = b.ID
		return nil, nil
	})
	hotels := agent.New("hotels").Step("hotel", func(_ context.Context, req agent.Request) (any, error) {
		var b booking
		if err := req.DecodeResult("flight", &b); err != nil {
			return nil, err
		}
		hotelSaw = b.ID
		return booking{ID: "H-near-" + b.ID}, nil
	}, ok)
	env := sastest.New(t, trip, airline, hotels, agent.New("payments").Step("pay", ok, nil))
	env.Fail("pay", 1, agent.Reject(errors.New("card declined")))
	res := env.Run("trip", "o-7", nil)

	require.Equal(t, "F-o-7", hotelSaw)
	require.Equal(t, "F-o-7", undoSaw, "the undo saw its own step's result")
	require.Equal(t, map[string]json.RawMessage{
		"flight": json.RawMessage(`{"bookingId":"F-o-7"}`), "hotel": json.RawMessage(`{"bookingId":"H-near-F-o-7"}`),
	}, res.Results)
	var h booking
	require.NoError(t, res.Decode("hotel", &h))
	require.Equal(t, "H-near-F-o-7", h.ID)
	require.Error(t, res.Decode("pay", &h))

	// The rejection: compensated, its own ending, nobody paged.
	require.Equal(t, sastest.StatusRejected, res.Status)
	require.Equal(t, []string{"hotel", "flight"}, res.Undone, "pay has no undo")
	pay, _ := res.Step("pay")
	require.True(t, pay.Rejected)
	require.Equal(t, "card declined", pay.Reason)
	require.Empty(t, res.Alerts)
	require.Equal(t, []string{"received", "step-done/flight", "step-done/hotel", "rejected/pay"}, res.Statuses)
}

// A rejection of a step with nothing before it to undo ends the order at
// once; a permanent failure of the same step still alerts.
func TestARejectionIsNotAnIncident(t *testing.T) {
	t.Parallel()
	expense := []workflow.Workflow{{Name: "expense", Steps: []workflow.Step{
		{Name: "approve", Agent: "finance", Action: "approve", Timeout: workflow.Duration(10 * time.Second)},
	}}}
	approve := func(_ context.Context, req agent.Request) (any, error) {
		var e struct{ Amount int }
		if err := req.DecodePayload(&e); err != nil {
			return nil, err
		}
		if e.Amount > 1000 {
			return nil, agent.Reject(errors.New("over budget"))
		}
		if e.Amount < 0 {
			return nil, agent.Permanent(errors.New("a negative amount"))
		}
		return map[string]bool{"approved": true}, nil
	}
	env := sastest.New(t, expense, agent.New("finance").Step("approve", approve, nil))
	res := env.Run("expense", "e-1", map[string]int{"amount": 5000})
	require.Equal(t, sastest.StatusRejected, res.Status)
	require.Equal(t, []string{"received", "rejected/approve"}, res.Statuses)
	require.Empty(t, res.Alerts)

	res = env.Run("expense", "e-2", map[string]int{"amount": -1})
	require.Equal(t, sastest.StatusFailed, res.Status)
	require.Len(t, res.Alerts, 1)

	res = env.Run("expense", "e-3", map[string]int{"amount": 10})
	require.Equal(t, sastest.StatusProcessed, res.Status)
	require.JSONEq(t, `{"approved":true}`, string(res.Results["approve"]))
}

// A step with nothing to undo before a failed step whose own undo ran: the
// order ends Compensated, its first step Processed for good (the kit reads
// the order with its definition; from the records alone it was stuck
// Processing).
func TestAStepWithoutAnUndoBeforeAFailedOne(t *testing.T) {
	t.Parallel()
	wfs := []workflow.Workflow{{Name: "notify-pay", Steps: []workflow.Step{
		{Name: "notify", Agent: "mail", Action: "send", Timeout: workflow.Duration(10 * time.Second)},
		{Name: "charge", Agent: "payments", Action: "charge", Undo: "refund", Timeout: workflow.Duration(10 * time.Second)},
	}}}
	env := sastest.NewWith(t, sastest.Options{}, wfs, agent.New("mail").Step("notify", ok, nil),
		agent.New("payments").Step("charge", ok, ok))
	env.Fail("charge", 1, agent.Permanent(errors.New("card processor said no")))
	res := env.Run("notify-pay", "o-1", nil)
	require.Equal(t, sastest.StatusCompensated, res.Status)
	require.Equal(t, []string{"charge"}, res.Undone)
}
