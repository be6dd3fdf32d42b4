package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// viewStore serves one order and the definitions of its version; the rest
// of sas.StateStore is not called by the tracker.
type viewStore struct {
	sas.StateStore
	view sas.OrderView
	defs map[string]sas.Workflow
}

func (s *viewStore) GetOrder(context.Context, string) (sas.OrderView, error) { return s.view, nil }

func (s *viewStore) GetDefinition(_ context.Context, name, version string) (sas.Workflow, error) {
	if w, ok := s.defs[name+"#"+version]; ok {
		return w, nil
	}
	return sas.Workflow{}, sas.ErrNotFound
}

// A cancelled order whose processed step still owes its undo (the moment
// between the marked step's settling and the claim of the undo) is not
// finished: the watch reads it with its definition, which says the step
// has an undo, and prints its line only once the undo is done. Read from
// its records alone, it read settled and printed "Cancelled" early.
func TestTheWatchWaitsForACancelledOrdersUndo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	wf := sas.Workflow{Name: "trip", Steps: []sas.StepDef{
		{Name: "flight", Agent: "flights", Undo: "cancel", Timeout: time.Minute},
		{Name: "hotel", Agent: "hotels", Timeout: time.Minute},
	}}
	at := time.Date(2030, 1, 2, 10, 4, 5, 0, time.UTC)
	order := sas.Order{OrderID: "o-1", Workflow: wf.Name, Version: wf.Version(), CreatedAt: at}
	for i := range wf.Steps {
		order.Steps = append(order.Steps, wf.Steps[i].Name)
	}
	store := &viewStore{defs: map[string]sas.Workflow{wf.Name + "#" + wf.Version(): wf}, view: sas.OrderView{
		Order: order,
		Steps: []sas.StepRecord{
			{OrderID: "o-1", Step: 0, StepName: "flight", ProcessState: sas.Processed},
			{OrderID: "o-1", Step: 1, StepName: "hotel", ProcessState: sas.Processed, Cancelled: true},
		},
	}}
	var out bytes.Buffer
	tr := newTracker(newConsole(&out, &out), store, sas.IntakeRules{})
	tr.watch("o-1")
	tr.sweep(ctx)
	require.Empty(t, out.String(), "the flight's undo is still to come")

	store.view.Steps[0].ProcessState = sas.Compensated
	tr.sweep(ctx)
	require.Contains(t, out.String(), "o-1  trip  Cancelled")
}
