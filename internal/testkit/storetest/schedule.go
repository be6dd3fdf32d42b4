package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// run is the submission of the run of schedule name scheduled for
// T0 + hour hours.
func run(name string, hour int, prev string, exclusive bool) sas.SubmitParams {
	at := T0.Truncate(time.Hour).Add(time.Duration(hour) * time.Hour)
	return sas.SubmitParams{Order: order(sas.RunOrderID(name, at), 2), Now: T0, PickupBy: at.Add(time.Minute),
		Run: &sas.RunClaim{Schedule: name, ScheduledAt: at, Prev: prev, Exclusive: exclusive}}
}

// testRunsRecordTheirSchedule: a run's submission records it in its
// schedule's state in the same write; its copies (the duplicate path)
// change nothing; a schedule that never ran is not found.
func testRunsRecordTheirSchedule(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.New(t).Store
	_, err := s.GetSchedule(ctx, "nightly")
	require.ErrorIs(t, err, sas.ErrNotFound)

	p := run("nightly", 1, "", false)
	res, err := s.Submit(ctx, p)
	require.NoError(t, err)
	require.True(t, res.Created)
	for range 2 {
		res, err = s.Submit(ctx, p) // a copy of the trigger
		require.NoError(t, err)
		require.False(t, res.Created)
	}
	st, err := s.GetSchedule(ctx, "nightly")
	require.NoError(t, err)
	require.Equal(t, sas.ScheduleState{Name: "nightly", Running: p.Order.OrderID, LastRunAt: p.Run.ScheduledAt, Runs: 1}, st)

	// Under allow, a run starts whatever the schedule's running order.
	q := run("nightly", 2, "", false)
	_, err = s.Submit(ctx, q)
	require.NoError(t, err)
	st, err = s.GetSchedule(ctx, "nightly")
	require.NoError(t, err)
	require.Equal(t, q.Order.OrderID, st.Running)
	require.Equal(t, 2, st.Runs)

	// A claim that is not the run's own id is invalid, and writes nothing.
	bad := run("nightly", 3, "", false)
	bad.Order.OrderID = "nightly-by-hand"
	_, err = s.Submit(ctx, bad)
	require.ErrorIs(t, err, sas.ErrInvalid)
	_, err = s.GetOrder(ctx, "nightly-by-hand")
	require.ErrorIs(t, err, sas.ErrNotFound)
}

// testExclusiveRunIsFenced: an exclusive run starts only while the
// schedule's running order is the one its scheduler read; the loser's
// order is not written; among many racing runs read against the same
// running order, exactly one starts.
func testExclusiveRunIsFenced(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.New(t).Store
	first := run("hourly", 0, "", true)
	_, err := s.Submit(ctx, first)
	require.NoError(t, err)

	stale := run("hourly", 1, "", true) // read before the first started
	_, err = s.Submit(ctx, stale)
	require.ErrorIs(t, err, sas.ErrLostRace)
	_, err = s.GetOrder(ctx, stale.Order.OrderID)
	require.ErrorIs(t, err, sas.ErrNotFound, "the loser's order is not written")

	// A copy of the first run takes the duplicate path, fence or not.
	dup := run("hourly", 0, "someone-else", true)
	res, err := s.Submit(ctx, dup)
	require.NoError(t, err)
	require.False(t, res.Created)

	var wg sync.WaitGroup
	created := make([]bool, h.Rounds)
	errs := make([]error, h.Rounds)
	for i := range h.Rounds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.Submit(ctx, run("hourly", 2+i, first.Order.OrderID, true))
			created[i], errs[i] = r.Created, err
		}()
	}
	wg.Wait()
	won := 0
	for i := range h.Rounds {
		if created[i] {
			won++
			continue
		}
		// A loser lost the race, or met the winner's transaction in
		// flight (DynamoDB's TransactionConflict), which decided nothing.
		require.True(t, errors.Is(errs[i], sas.ErrLostRace) || errors.Is(errs[i], sas.ErrConflict), "round %d: %v", i, errs[i])
	}
	require.Equal(t, 1, won, "exactly one racing run starts")
	st, err := s.GetSchedule(ctx, "hourly")
	require.NoError(t, err)
	require.Equal(t, 2, st.Runs)
	require.NotEqual(t, first.Order.OrderID, st.Running)
}

// testSkipRunCountsOnce: a skipped run is recorded, and the same run's
// trigger again counts nothing more.
func testSkipRunCountsOnce(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.New(t).Store
	at := func(hour int) time.Time { return T0.Truncate(time.Hour).Add(time.Duration(hour) * time.Hour) }
	skip := func(hour int) sas.SkipRunParams {
		return sas.SkipRunParams{Schedule: "nightly", OrderID: sas.RunOrderID("nightly", at(hour)), ScheduledAt: at(hour)}
	}
	for range 2 {
		st, err := s.SkipRun(ctx, skip(1))
		require.NoError(t, err)
		require.Equal(t, sas.ScheduleState{Name: "nightly", Skipped: 1, LastSkipped: skip(1).OrderID, LastSkippedAt: at(1)}, st)
	}
	st, err := s.SkipRun(ctx, skip(2))
	require.NoError(t, err)
	require.Equal(t, 2, st.Skipped)
	got, err := s.GetSchedule(ctx, "nightly")
	require.NoError(t, err)
	require.Equal(t, st, got)

	bad := skip(3)
	bad.OrderID = fmt.Sprintf("%s-x", bad.OrderID)
	_, err = s.SkipRun(ctx, bad)
	require.ErrorIs(t, err, sas.ErrInvalid)
}
