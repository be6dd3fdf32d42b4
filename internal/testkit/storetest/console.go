package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// testListOrders: ListOrders pages through every order exactly once, newest
// first, within the time window, projected (no payload, no steps), and
// never lists a workflow definition.
func testListOrders(t *testing.T, h Harness) {
	f := h.New(t)
	ol, ok := f.Store.(sas.OrderLister)
	require.True(t, ok, "%T does not list orders (sas.OrderLister)", f.Store)
	ctx := context.Background()
	const n = 23
	for i := range n {
		o := order(fmt.Sprintf("list-%02d", i), 2)
		o.Version = "v1"
		_, err := f.Store.Submit(ctx, sas.SubmitParams{Order: o, Now: at(time.Duration(i) * time.Second), PickupBy: at(time.Hour)})
		require.NoError(t, err)
	}
	require.NoError(t, f.Store.PutDefinition(ctx, sas.Workflow{Name: "test", Steps: []sas.StepDef{{Name: "step0", Agent: "a", Timeout: time.Second}}}))

	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10, "paging does not end")
		page, err := ol.ListOrders(ctx, sas.ListOrdersParams{Limit: 5, Cursor: cursor})
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Orders), 5)
		for _, o := range page.Orders {
			require.Equal(t, "test", o.Workflow)
			require.Equal(t, "v1", o.Version)
			require.Nil(t, o.Payload, "the index does not project the payload")
			require.Nil(t, o.Steps)
			got = append(got, o.OrderID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprintf("list-%02d", n-1-i)
	}
	require.Equal(t, want, got, "every order once, newest first")

	// A window: [5s, 9s) holds orders 5..8.
	page, err := ol.ListOrders(ctx, sas.ListOrdersParams{After: at(5 * time.Second), Before: at(9 * time.Second)})
	require.NoError(t, err)
	var ids []string
	for _, o := range page.Orders {
		ids = append(ids, o.OrderID)
	}
	require.Equal(t, []string{"list-08", "list-07", "list-06", "list-05"}, ids)
	require.Equal(t, at(8*time.Second), page.Orders[0].CreatedAt)

	_, err = ol.ListOrders(ctx, sas.ListOrdersParams{Cursor: "not a cursor"})
	require.ErrorIs(t, err, sas.ErrInvalid)
}

// testAgentPauses: a pause holds until resumed; pausing twice keeps the
// first start; resuming a running agent changes nothing; the pauses never
// show up as an order or in a listing.
func testAgentPauses(t *testing.T, h Harness) {
	f := h.New(t)
	ps, ok := f.Store.(sas.PauseStore)
	require.True(t, ok, "%T keeps no pauses (sas.PauseStore)", f.Store)
	ctx := context.Background()

	all, err := ps.AgentPauses(ctx)
	require.NoError(t, err)
	require.Empty(t, all)

	got, err := ps.ResumeAgent(ctx, sas.PauseParams{Agent: "payments", Now: at(0), Actor: "op"})
	require.NoError(t, err)
	require.False(t, got.Paused())
	require.Equal(t, "payments", got.Agent)

	got, err = ps.PauseAgent(ctx, sas.PauseParams{Agent: "payments", Now: at(time.Second), Actor: "op"})
	require.NoError(t, err)
	require.Equal(t, sas.AgentPause{Agent: "payments", PausedAt: at(time.Second), Actor: "op"}, got)
	got, err = ps.PauseAgent(ctx, sas.PauseParams{Agent: "payments", Now: at(2 * time.Second), Actor: "other"})
	require.NoError(t, err)
	require.Equal(t, at(time.Second), got.PausedAt, "pausing again keeps the pause's start")
	_, err = ps.PauseAgent(ctx, sas.PauseParams{Agent: "shipping", Now: at(3 * time.Second), Actor: "op"})
	require.NoError(t, err)

	all, err = ps.AgentPauses(ctx)
	require.NoError(t, err)
	require.True(t, all.Paused("payments"))
	require.True(t, all.Paused("shipping"))
	require.False(t, all.Paused("flights"))

	got, err = ps.ResumeAgent(ctx, sas.PauseParams{Agent: "payments", Now: at(10 * time.Second), Actor: "op2"})
	require.NoError(t, err)
	require.Equal(t, sas.AgentPause{Agent: "payments", PausedAt: at(time.Second), ResumedAt: at(10 * time.Second), Actor: "op2"}, got)
	got, err = ps.ResumeAgent(ctx, sas.PauseParams{Agent: "payments", Now: at(11 * time.Second), Actor: "op3"})
	require.NoError(t, err)
	require.Equal(t, at(10*time.Second), got.ResumedAt, "resuming again changes nothing")

	got, err = ps.PauseAgent(ctx, sas.PauseParams{Agent: "payments", Now: at(20 * time.Second), Actor: "op"})
	require.NoError(t, err)
	require.Equal(t, sas.AgentPause{Agent: "payments", PausedAt: at(20 * time.Second), Actor: "op"}, got, "a new pause after a resume")

	_, err = ps.PauseAgent(ctx, sas.PauseParams{Agent: "bad name", Now: at(0)})
	require.ErrorIs(t, err, sas.ErrInvalid)

	for _, st := range []sas.ProcessState{sas.Pending, sas.Processing, sas.Error} {
		page, err := f.Store.ListByState(ctx, sas.ListByStateParams{State: st})
		require.NoError(t, err)
		require.Empty(t, page.Records)
	}
	res, err := f.Store.FindDue(ctx, sas.FindDueParams{State: sas.Processing, Now: at(time.Hour)})
	require.NoError(t, err)
	require.Empty(t, res.Records)
}
