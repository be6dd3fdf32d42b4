package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/sas"
)

// A request for an element of a fan-out carries the element (Item), its
// position (Index, read from the element's key) and its own idempotency
// key; the step's index is the fan-out's. DecodeItem reads the element; a
// request with none, or one that does not decode, is a permanent failure
// naming the step.
func TestDecodeItemReadsTheElement(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	type line struct {
		SKU string `json:"sku"`
		Qty int    `json:"qty"`
	}
	a := agent.New("flights").Step("reserve-flight", func(_ context.Context, req agent.Request) (any, error) {
		var l line
		if err := req.DecodeItem(&l); err != nil {
			return nil, err
		}
		return map[string]any{"held": fmt.Sprintf("%s x%d", l.SKU, l.Qty), "index": req.Index, "step": req.StepIndex, "key": req.IdempotencyKey}, nil
	}, nil)
	element := request("o-elem", func(r *sas.AgentRequest) {
		r.Step = sas.ElementStep(1, 7)
		r.IdempotencyKey = sas.IdempotencyKey(r.OrderID, r.Step, 0, false)
		r.Item = json.RawMessage(`{"sku":"A-1","qty":3}`)
	})
	notAnElement := request("o-plain")
	badElement := request("o-bad", func(r *sas.AgentRequest) {
		r.Step = sas.ElementStep(1, 0)
		r.Item = json.RawMessage(`"just a string"`)
	})
	resp := f.handle(f.handler(a), event(element, notAnElement, badElement))
	require.Empty(t, resp.BatchItemFailures)
	got := map[string]sas.AgentReply{}
	for _, rep := range f.replies() {
		got[rep.OrderID] = rep
	}
	require.Equal(t, sas.OutcomeDone, got["o-elem"].Outcome, got["o-elem"].Reason)
	require.JSONEq(t, `{"held":"A-1 x3","index":7,"step":1,"key":"o-elem:1:i7"}`, string(got["o-elem"].Result))
	require.Equal(t, sas.ElementStep(1, 7), got["o-elem"].Step, "the reply names the element")
	require.Equal(t, sas.OutcomeFailed, got["o-plain"].Outcome)
	require.Contains(t, got["o-plain"].Reason, "the step is not a fan-out")
	require.Equal(t, sas.OutcomeFailed, got["o-bad"].Outcome)
	require.Contains(t, got["o-bad"].Reason, "reading element 0")
}

// Run, the agent's test entry, takes an element as the handler does.
func TestRunTakesAnElement(t *testing.T) {
	t.Parallel()
	a := agent.New("stock").Step("reserve", func(_ context.Context, req agent.Request) (any, error) {
		var sku string
		if err := req.DecodeItem(&sku); err != nil {
			return nil, err
		}
		return map[string]any{"sku": sku, "index": req.Index}, nil
	}, nil)
	out := a.Run(context.Background(), agent.Request{OrderID: "o-1", Step: "reserve", StepIndex: 2, Item: json.RawMessage(`"B-2"`), Index: 4})
	require.Equal(t, agent.StatusDone, out.Status, "%v", out.Err)
	require.JSONEq(t, `{"sku":"B-2","index":4}`, string(out.Result))
}
