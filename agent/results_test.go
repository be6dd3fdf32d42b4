package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/sas"
)

// A step reads the results of the steps before it with DecodeResult; its
// undo reads its own step's. A result it needs and does not have is a
// permanent failure naming the step.
func TestDecodeResultReadsWhatEarlierStepsReturned(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	type booking struct {
		ID string `json:"bookingId"`
	}
	a := agent.New("flights").Step("reserve-flight", func(_ context.Context, req agent.Request) (any, error) {
		var b booking
		if err := req.DecodeResult("reserve-hotel", &b); err != nil {
			return nil, err
		}
		return booking{ID: "F-for-" + b.ID}, nil
	}, func(_ context.Context, req agent.Request) (any, error) {
		var b booking
		if err := req.DecodeResult("reserve-flight", &b); err != nil {
			return nil, err
		}
		if !req.HasResult("reserve-hotel") {
			return nil, agent.Permanent(errors.New("the hotel's result is missing"))
		}
		return map[string]string{"cancelled": b.ID}, nil
	})
	with := request("o-with", func(r *sas.AgentRequest) {
		r.Results = sas.Results{"reserve-hotel": json.RawMessage(`{"bookingId":"H-1"}`)}
	})
	undo := request("o-undo", func(r *sas.AgentRequest) {
		r.Compensation = true
		r.Results = sas.Results{"reserve-hotel": json.RawMessage(`{"bookingId":"H-2"}`), "reserve-flight": json.RawMessage(`{"bookingId":"F-2"}`)}
	})
	without := request("o-without")
	resp := f.handle(f.handler(a), event(with, undo, without))
	require.Empty(t, resp.BatchItemFailures)
	got := map[string]sas.AgentReply{}
	for _, rep := range f.replies() {
		got[rep.OrderID] = rep
	}
	require.Equal(t, sas.OutcomeDone, got["o-with"].Outcome)
	require.JSONEq(t, `{"bookingId":"F-for-H-1"}`, string(got["o-with"].Result))
	require.Equal(t, sas.OutcomeDone, got["o-undo"].Outcome)
	require.JSONEq(t, `{"cancelled":"F-2"}`, string(got["o-undo"].Result))
	require.Equal(t, sas.OutcomeFailed, got["o-without"].Outcome)
	require.Contains(t, got["o-without"].Reason, `no result of step "reserve-hotel" (results: none)`)
}

// Reject is a failed reply that says it is a business rejection, however
// wrapped, run once; Permanent is not one; an undo's Reject is a failure
// of the undo, never a rejection.
func TestRejectRepliesRejected(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	do := func(_ context.Context, req agent.Request) (any, error) {
		if req.OrderID == "o-perm" {
			return nil, agent.Permanent(errors.New("the service refused the request"))
		}
		return nil, fmt.Errorf("booking: %w", agent.Reject(errors.New("card declined")))
	}
	a := agent.New("flights").Step("reserve-flight", do, do)
	undo := request("o-undo-rej", func(r *sas.AgentRequest) { r.Compensation = true })
	resp := f.handle(f.handler(a), event(request("o-rej"), request("o-perm"), undo))
	require.Empty(t, resp.BatchItemFailures)
	got := map[string]sas.AgentReply{}
	for _, rep := range f.replies() {
		require.Equal(t, sas.OutcomeFailed, rep.Outcome, rep.OrderID)
		got[rep.OrderID] = rep
	}
	require.True(t, got["o-rej"].Rejected)
	require.Equal(t, "booking: card declined", got["o-rej"].Reason)
	require.False(t, got["o-perm"].Rejected)
	require.False(t, got["o-undo-rej"].Rejected, "an undo is never rejected")

	out := a.Run(context.Background(), agent.Request{OrderID: "o-run", Step: "reserve-flight", IdempotencyKey: "o-run:0"})
	require.Equal(t, agent.StatusFailed, out.Status)
	require.True(t, out.Rejected)
	require.EqualError(t, agent.Reject(nil), "rejected")
}
