package sastest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/sastest"
	"github.com/sas-go/sas/workflow"
)

// stock holds stock for each line of an order, two lines at a time, then
// charges the total (docs/workflows.md, "Fan-out over a list").
var stock = []workflow.Workflow{{Name: "stock", Steps: []workflow.Step{
	{Name: "reserve", Agent: "warehouse", Action: "hold", Undo: "release", Timeout: workflow.Duration(10 * time.Second),
		ForEach: &workflow.ForEach{Items: "payload.lines", Concurrency: 2}},
	{Name: "pay", Agent: "payments", Action: "charge", Timeout: workflow.Duration(10 * time.Second)},
}}}

type line struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

type hold struct {
	ID string `json:"holdId"`
}

// warehouse holds a line's stock, and releases the hold its own result
// names; released records what it released. An element refused has no
// result: its undo releases nothing (the remote's idempotency key would
// find no hold under it either).
func warehouse(released *[]string) *agent.Agent {
	return agent.New("warehouse").Step("reserve", func(_ context.Context, req agent.Request) (any, error) {
		var l line
		if err := req.DecodeItem(&l); err != nil {
			return nil, err
		}
		return hold{ID: "H-" + l.SKU}, nil
	}, func(_ context.Context, req agent.Request) (any, error) {
		if _, ok := req.Results["reserve"]; !ok {
			return nil, nil
		}
		var h hold
		if err := req.DecodeResult("reserve", &h); err != nil {
			return nil, err
		}
		*released = append(*released, h.ID)
		return nil, nil
	})
}

var fourLines = map[string]any{"lines": []line{{"a", 1}, {"b", 2}, {"c", 1}, {"d", 5}}}

// A fan-out in the kit: each element's result, the step's result the list
// of them in order, which the step after it reads.
func TestAFanOutsElementsAndTheirResults(t *testing.T) {
	t.Parallel()
	var released []string
	var paidFor []hold
	pay := agent.New("payments").Step("pay", func(_ context.Context, req agent.Request) (any, error) {
		return nil, req.DecodeResult("reserve", &paidFor)
	}, nil)
	env := sastest.New(t, stock, warehouse(&released), pay)
	res := env.Run("stock", "o-1", fourLines)

	require.Equal(t, sastest.StatusProcessed, res.Status)
	require.Equal(t, []hold{{"H-a"}, {"H-b"}, {"H-c"}, {"H-d"}}, paidFor, "the next step reads the list of results, in order")
	var holds []hold
	require.NoError(t, res.Decode("reserve", &holds))
	require.Equal(t, paidFor, holds)
	reserve, _ := res.Step("reserve")
	require.Len(t, reserve.Elements, 4)
	for i, el := range reserve.Elements {
		require.Equal(t, i, el.Index)
		require.Equal(t, sastest.StateProcessed, el.State)
		require.Equal(t, 1, el.Attempts)
		require.JSONEq(t, `{"holdId":"H-`+string(rune('a'+i))+`"}`, string(el.Result))
	}
	require.JSONEq(t, `{"sku":"c","qty":1}`, string(reserve.Elements[2].Item))
	require.Empty(t, released)
	require.Equal(t, []string{"reserve[0]#1", "reserve[1]#1", "reserve[2]#1", "reserve[3]#1", "pay#1"}, calls(res))
}

// An element refused for good fails its fan-out: no element starts after
// it, and every element that took effect (or may have: the refused one
// too) is undone, highest index first, each undo seeing its own result.
func TestAFailedElementUndoesTheOthers(t *testing.T) {
	t.Parallel()
	var released []string
	env := sastest.New(t, stock, warehouse(&released), agent.New("payments").Step("pay", ok, nil))
	env.FailElement("reserve", 2, 1, agent.Permanent(errors.New("out of stock")))
	res := env.Run("stock", "o-2", fourLines)

	require.Equal(t, sastest.StatusCompensated, res.Status, "%v", res.History)
	// Elements 2 and 3 started as 0 and 1 completed; 3 was in flight when
	// 2 failed, so it settled, and was undone with the others.
	require.Equal(t, []string{"reserve[0]#1", "reserve[1]#1", "reserve[2]#1", "reserve[3]#1",
		"reserve[3]#1 undo", "reserve[2]#1 undo", "reserve[1]#1 undo", "reserve[0]#1 undo"}, calls(res), "pay never ran")
	require.Equal(t, []string{"reserve[3]", "reserve[2]", "reserve[1]", "reserve[0]"}, res.Undone)
	require.Equal(t, []string{"H-d", "H-b", "H-a"}, released, "each undo saw its own element's result")
	reserve, _ := res.Step("reserve")
	require.Equal(t, sastest.StateCompensated, reserve.State)
	require.Len(t, reserve.Elements, 4)
	for _, el := range reserve.Elements {
		require.Equal(t, sastest.StateCompensated, el.State, "element %d", el.Index)
	}
	require.Equal(t, "out of stock", reserve.Elements[2].Reason)
	require.Empty(t, reserve.Elements[2].Result)
	require.Equal(t, []string{"reserve: Error: element 2 failed: out of stock"}, res.Alerts)
}

// A cancel while a fan-out runs: the elements in flight settle, no element
// starts after them, and every element that took effect is undone, highest
// index first; the order ends cancelled, nobody paged.
func TestACancelledFanOutUndoesItsElements(t *testing.T) {
	t.Parallel()
	var released []string
	env := sastest.New(t, stock, warehouse(&released), agent.New("payments").Step("pay", ok, nil))
	env.CancelWhen("o-3", "reserve") // as element 0 is about to run
	res := env.Run("stock", "o-3", fourLines)

	require.Equal(t, sastest.StatusCancelled, res.Status, "%v", res.History)
	// Elements 0 and 1 were in flight (the first window): they settled,
	// 2 and 3 never started, and pay never ran.
	require.Equal(t, []string{"reserve[0]#1", "reserve[1]#1", "reserve[1]#1 undo", "reserve[0]#1 undo"}, calls(res))
	require.Equal(t, []string{"reserve[1]", "reserve[0]"}, res.Undone)
	require.Equal(t, []string{"H-b", "H-a"}, released)
	reserve, _ := res.Step("reserve")
	require.Len(t, reserve.Elements, 2, "no element started after the cancel")
	require.Empty(t, res.Alerts)
}
