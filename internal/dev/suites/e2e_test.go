package suites_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/dev/localrun"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/emulator"
	"github.com/sas-go/sas/internal/testkit/storetest"
)

func TestHappyPathEndToEnd(t *testing.T) {
	emulator.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sys, err := localrun.Start(ctx, localrun.Options{})
	require.NoError(t, err)
	defer sys.Close()
	defer runInBackground(ctx, sys)()

	var ids []string
	var intakes []sas.Intake
	for i := 0; i < 6; i++ {
		wf := "payment"
		if i%2 == 1 {
			wf = "order"
		}
		id := fmt.Sprintf("happy-%d", i)
		ids = append(ids, id)
		intakes = append(intakes, sas.Intake{OrderID: id, Workflow: wf, Payload: []byte(`{"amount":10}`), ReplyTo: sys.StatusQueueURL})
	}
	require.NoError(t, sys.Submit(ctx, intakes...))
	views, err := sys.WaitTerminal(ctx, ids, 200*time.Millisecond)
	require.NoError(t, err)
	for _, id := range ids {
		v := views[id]
		require.Equal(t, sas.Processed, v.State(), "order %s: %+v", id, v.Steps)
		storetest.RequireLegalHistory(t, v)
	}
	require.Empty(t, sys.Sim.Duplicates())

	// The submitter hears of every order: received, each step done, and
	// processed, numbered in that order (itRequireStatusSequence says why the
	// arrival order is not checked). "processed" is posted after the last
	// write, so it may still be on its way.
	byID := map[string][]sas.Status{}
	processed := map[string]bool{} // by order: a status may arrive twice
	for len(processed) < len(ids) {
		sts, err := sys.Statuses(ctx)
		require.NoError(t, err)
		for _, st := range sts {
			byID[st.OrderID] = append(byID[st.OrderID], st)
			if st.Status == sas.StatusProcessed {
				processed[st.OrderID] = true
			}
		}
		if len(processed) < len(ids) {
			select {
			case <-ctx.Done():
				t.Fatalf("%d orders without a processed status: %v", len(ids)-len(processed), ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	for i, id := range ids {
		want := []string{"received", "step-done:charge", "processed"}
		if i%2 == 1 {
			want = []string{"received", "step-done:reserve", "step-done:charge", "step-done:ship", "processed"}
		}
		itRequireStatusSequence(t, id, byID[id], true, want...)
	}

	byOrder := map[string]int{}
	for _, e := range sys.Sim.Effects() {
		byOrder[e.OrderID]++
	}
	for i, id := range ids {
		want := 1
		if i%2 == 1 {
			want = 3
		}
		require.Equal(t, want, byOrder[id], "one effect per step of %s", id)
	}
}
