package sasctl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// sasctl schedules lists the declared schedules with their last run (its
// state), runs, skips, and next run.
func TestSchedulesListsLastAndNextRuns(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "schedules.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"schedules": [
		{"name": "nightly", "expression": "cron(0 2 * * ? *)", "workflow": "payment", "overlap": "skip"},
		{"name": "never-ran", "expression": "rate(1 hour)", "workflow": "payment"}]}`), 0o600))
	at := time.Date(2026, 11, 27, 2, 0, 0, 0, time.UTC)
	id := sas.RunOrderID("nightly", at)
	_, err := f.store.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: id, Workflow: "payment", Steps: []string{"charge"}}, Now: t0, PickupBy: t0.Add(time.Minute),
		Run: &sas.RunClaim{Schedule: "nightly", ScheduledAt: at, Exclusive: true}})
	require.NoError(t, err)
	skipped := at.Add(24 * time.Hour)
	_, err = f.store.SkipRun(ctx, sas.SkipRunParams{Schedule: "nightly", OrderID: sas.RunOrderID("nightly", skipped), ScheduledAt: skipped})
	require.NoError(t, err)

	require.NoError(t, f.app.Run(ctx, []string{"schedules", "-file", file}))
	lines := strings.Split(strings.TrimSpace(f.out.String()), "\n")
	require.Len(t, lines, 3)
	require.Equal(t, []string{"nightly", "cron(0", "2", "*", "*", "?", "*)", "skip", id, "Pending", "1", "1", "nightly-2026-11-28T02:00:00Z",
		f.app.now().Truncate(24 * time.Hour).Add(26 * time.Hour).Format(time.RFC3339)}, strings.Fields(lines[1]))
	require.Equal(t, []string{"never-ran", "rate(1", "hour)", "allow", "-", "-", "0", "0", "-",
		f.app.now().Add(time.Hour).Format(time.RFC3339)}, strings.Fields(lines[2]))

	require.ErrorIs(t, f.app.Run(ctx, []string{"schedules"}), ErrUsage)
}
