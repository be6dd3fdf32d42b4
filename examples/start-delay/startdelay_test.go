package startdelay_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	startdelay "github.com/sas-go/sas/examples/start-delay"
	"github.com/sas-go/sas/sastest"
)

type bank struct {
	mu   sync.Mutex
	paid []time.Time
}

func (b *bank) Pay(_ context.Context, _, _ string, at time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.paid = append(b.paid, at)
	return nil
}

// Submitted now, the payroll runs on Monday at 09:00, never before, within
// a sweep of it; days of virtual time in milliseconds.
func TestThePayrollStartsOnMondayAt0900(t *testing.T) {
	t.Parallel()
	b := &bank{}
	env := sastest.New(t, startdelay.Workflows(), startdelay.Payroll(b))
	at := startdelay.NextMonday0900(env.Now(), time.UTC)
	wall := time.Now()
	res := env.RunAt(at, "payroll", "payroll-2026-48", startdelay.Run{Period: "2026-48"})
	require.Equal(t, sastest.StatusProcessed, res.Status)
	require.Len(t, b.paid, 1)
	require.False(t, b.paid[0].Before(at), "never before its start time")
	require.Less(t, b.paid[0].Sub(at), 2*time.Minute, "within a sweep or two")
	require.Less(t, time.Since(wall), 10*time.Second)
}

// A start time within SQS's 15 minutes starts by the scheduler's own
// delayed message, about a second after it.
func TestAStartSoonIsPrecise(t *testing.T) {
	t.Parallel()
	b := &bank{}
	env := sastest.New(t, startdelay.Workflows(), startdelay.Payroll(b))
	at := env.Now().Add(10 * time.Minute)
	res := env.RunAt(at, "payroll", "payroll-soon", startdelay.Run{Period: "2026-49"})
	require.Equal(t, sastest.StatusProcessed, res.Status)
	require.Len(t, b.paid, 1)
	require.False(t, b.paid[0].Before(at))
	require.LessOrEqual(t, b.paid[0].Sub(at), 2*time.Second)
}

func TestNextMonday0900(t *testing.T) {
	t.Parallel()
	fri := time.Date(2026, 11, 27, 15, 0, 0, 0, time.UTC)
	require.Equal(t, time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), startdelay.NextMonday0900(fri, time.UTC))
	mon := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	require.Equal(t, mon.AddDate(0, 0, 7), startdelay.NextMonday0900(mon, time.UTC), "at 09:00 sharp: next week's")
}
