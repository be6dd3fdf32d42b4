package supervisor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 5, 10, 0, 0, 0, time.UTC)
	p := policy{MaxFailures: 3, BaseBackoff: 5 * time.Second, MaxBackoff: 15 * time.Minute}
	rec := func(state sas.ProcessState, lockedBy string, failures int, dueAt time.Time) sas.StepRecord {
		return sas.StepRecord{OrderID: "o-1", Step: 0, ProcessState: state, LockedBy: lockedBy,
			FailureCount: failures, Attempt: 2, DueAt: dueAt}
	}
	past, future := now.Add(-time.Second), now.Add(time.Millisecond)
	tests := []struct {
		name     string
		policy   policy
		rec      sas.StepRecord
		action   action
		failures int
		backoff  time.Duration
		reason   string
	}{
		{"processing expired, first failure", p, rec(sas.Processing, "s1", 0, past), rescue, 1, 5 * time.Second, "attempt 2 not finished by its deadline 2026-11-05T09:59:59Z (failure 1 of 3: retry in 5s)"},
		{"a deadline equal to now has passed", p, rec(sas.Processing, "s1", 0, now), rescue, 1, 5 * time.Second, "failure 1 of 3"},
		{"processing not yet expired", p, rec(sas.Processing, "s1", 0, future), skip, 0, 0, ""},
		{"second failure backs off longer", p, rec(sas.Processing, "s1", 1, past), rescue, 2, 10 * time.Second, "failure 2 of 3: retry in 10s"},
		{"at the threshold: give up", p, rec(sas.Processing, "s1", 2, past), giveUp, 3, 0, "attempt 2 not finished by its deadline 2026-11-05T09:59:59Z (failure 3 of 3: giving up)"},
		{"past the threshold (lowered since): give up", p, rec(sas.Processing, "s1", 7, past), giveUp, 8, 0, "failure 8 of 3: giving up"},
		{"stranded pending", p, rec(sas.Pending, "", 0, past), rescue, 1, 5 * time.Second, "not claimed by its pick-up deadline 2026-11-05T09:59:59Z"},
		{"stranded pending at the threshold", p, rec(sas.Pending, "", 2, past), giveUp, 3, 0, "not claimed by its pick-up deadline"},
		{"pending that waits on an earlier step", p, rec(sas.Pending, "", 0, time.Time{}), skip, 0, 0, ""},
		{"pending, pick-up deadline ahead", p, rec(sas.Pending, "", 0, future), skip, 0, 0, ""},
		{"undo expired", p, rec(sas.Compensating, "s1", 0, past), rescue, 1, 5 * time.Second, "undo attempt 2 not finished by its deadline"},
		{"undo handed back, not re-claimed", p, rec(sas.Compensating, "", 1, past), rescue, 2, 10 * time.Second, "undo not re-claimed by its pick-up deadline"},
		{"undo at the threshold", p, rec(sas.Compensating, "", 2, past), giveUp, 3, 0, "undo not re-claimed by its pick-up deadline 2026-11-05T09:59:59Z (failure 3 of 3: giving up)"},
		{"processed is never due", p, rec(sas.Processed, "", 0, past), skip, 0, 0, ""},
		{"error waits for an operator", p, rec(sas.Error, "", 3, past), skip, 0, 0, ""},
		{"compensation failed waits for an operator", p, rec(sas.CompensationFailed, "", 3, past), skip, 0, 0, ""},
		{"threshold 1 gives up at once", policy{MaxFailures: 1, BaseBackoff: time.Second, MaxBackoff: time.Minute}, rec(sas.Processing, "s1", 0, past), giveUp, 1, 0, "failure 1 of 1: giving up"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := tc.policy.decide(tc.rec, now)
			require.Equal(t, tc.action, d.Action, "action")
			require.Equal(t, tc.failures, d.Failures, "failures")
			require.Equal(t, tc.backoff, d.Backoff, "backoff")
			require.Contains(t, d.Reason, tc.reason)
			if d.Action != skip {
				require.Equal(t, tc.rec.FailureCount+1, d.Failures, "the write bumps FailureCount once")
			}
		})
	}
}

func TestBackoffGrowsAndIsCapped(t *testing.T) {
	t.Parallel()
	base, max := 5*time.Second, 15*time.Minute
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 900, 900}
	for i, w := range want {
		require.Equal(t, w*time.Second, backoff(i+1, base, max), "failure %d", i+1)
	}
	require.Equal(t, max, backoff(1_000_000, base, max), "no overflow")
	require.Equal(t, 3*time.Second, backoff(5, 3*time.Second, 3*time.Second), "base equal to the cap")
	require.Equal(t, 20*time.Second, backoff(2, 10*time.Second, 20*time.Second))
	require.Equal(t, 25*time.Second, backoff(3, 10*time.Second, 25*time.Second), "a cap between two doublings")
}
